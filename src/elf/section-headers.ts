// Section headers, read only when asked for: the loader never uses them and stripped files have none,
// but the rewriter keeps `.dynstr`/`.dynamic` headers in step with what it moves, and `print` shows them.

import { checkRange, type ByteSource } from './byte-source.js';
import { EMPTY_BYTE_STRING, type ByteString } from './byte-string.js';
import { SHDR, type ElfCodec, type ElfHeaderFields, type SectionHeader } from './codec.js';
import { SHT } from './constants.js';
import type { ElfImage } from './elf-image.js';
import { StringTable, stringAt } from './string-table.js';
import { malformedInput } from '../errors/cuda-patchelf-error.js';

/** gABI: e_shstrndx = SHN_XINDEX means the index is in section header 0's sh_link. */
const SHN_XINDEX = 0xffff;
/** Section name tables up to this size are read whole (real ones are a few hundred bytes). */
const WHOLE_NAME_TABLE = 64 * 1024;

export interface Section extends SectionHeader {
  readonly index: number;
  /** The name from the section header string table, as a byte string ('' when there is none). */
  readonly name: ByteString;
  /** File offset of this section's header (where a rewrite patches it). */
  readonly headerOffset: number;
}

/** The section header table as decoded records, without names: one read (two with extended numbering). */
export async function readSectionHeaderTable(source: ByteSource, codec: ElfCodec, header: ElfHeaderFields): Promise<SectionHeader[]> {
  if (header.e_shoff === 0) return [];
  const entrySize = codec.sizeOf(SHDR);
  if (header.e_shentsize !== entrySize) {
    throw malformedInput(`e_shentsize is ${header.e_shentsize}, expected ${entrySize} for ELF${codec.elfClass}`);
  }
  checkRange(source.size, header.e_shoff, entrySize, 'section header 0');
  // Extended numbering: e_shnum = 0 with a table present puts the count in section 0's sh_size.
  const count =
    header.e_shnum === 0 ? codec.decode(SHDR, await source.read(header.e_shoff, entrySize, 'section header 0'), 0).sh_size : header.e_shnum;
  checkRange(source.size, header.e_shoff, count * entrySize, `section header table (${count} entries)`);
  const bytes = await source.read(header.e_shoff, count * entrySize, 'section header table');
  const raw: SectionHeader[] = [];
  for (let i = 0; i < count; i++) raw.push(codec.decode(SHDR, bytes, i * entrySize));
  return raw;
}

export async function readSectionHeaders(image: ElfImage): Promise<Section[]> {
  const { source, codec, header } = image;
  const raw = await readSectionHeaderTable(source, codec, header);
  const entrySize = codec.sizeOf(SHDR);
  const namesIndex = header.e_shstrndx === SHN_XINDEX ? (raw[0]?.sh_link ?? 0) : header.e_shstrndx;
  // The fields go onto the decoded record: a spread into a new literal costs microseconds per section.
  const section = (sh: SectionHeader, index: number, name: ByteString): Section => {
    const record = sh as SectionHeader & { index: number; name: ByteString; headerOffset: number };
    record.index = index;
    record.name = name;
    record.headerOffset = header.e_shoff + index * entrySize;
    return record;
  };
  if (namesIndex === 0) return raw.map((sh, index) => section(sh, index, EMPTY_BYTE_STRING));
  const namesHeader = raw[namesIndex];
  if (namesHeader === undefined) throw malformedInput(`e_shstrndx ${namesIndex} is not a section (there are ${raw.length})`);
  if (namesHeader.sh_type === SHT.SHT_NOBITS) throw malformedInput('the section name table has no bytes in the file (SHT_NOBITS)');
  checkRange(source.size, namesHeader.sh_offset, namesHeader.sh_size, 'section name table');
  const names = new StringTable(source, namesHeader.sh_offset, namesHeader.sh_size, 'section name table');
  // A name table of usual size is read once and decoded from memory; a huge one string by string.
  const whole = namesHeader.sh_size <= WHOLE_NAME_TABLE ? await names.readAll() : null;
  const result: Section[] = [];
  for (const [index, sh] of raw.entries()) {
    const name = whole === null ? await names.get(sh.sh_name) : stringAt(whole, sh.sh_name, 'section name table', namesHeader.sh_offset);
    result.push(section(sh, index, name));
  }
  return result;
}
