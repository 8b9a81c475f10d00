// The lazy ELF reader: the header, the program header table, the dynamic array found through
// PT_DYNAMIC and the strings it names. Section headers are read only on request (section-headers.ts):
// stripped files have none, and the loader never looks at them. The one exception tells a debug-info
// file from a damaged one (dynamicSectionHasNoBytes).

import { checkRange, type ByteSource } from './byte-source.js';
import { DYN, EHDR, ElfCodec, PHDR, SHDR, type DynamicEntry, type ElfHeaderFields, type ProgramHeader } from './codec.js';
import { DT, ELFCLASS32, ELFCLASS64, ELFDATA2LSB, ELFDATA2MSB, ELF_MAGIC, EI_NIDENT, PN_XNUM, PT, SHT } from './constants.js';
import { bytesToByteString, type ByteString } from './byte-string.js';
import { fileKind, startsWith } from './file-kind.js';
import { readSectionHeaderTable } from './section-headers.js';
import { StringTable } from './string-table.js';
import { CudaPatchelfError, malformedInput } from '../errors/cuda-patchelf-error.js';

export interface ElfHeader extends ElfHeaderFields {
  readonly osabi: number;
  readonly abiversion: number;
  /** The real number of program headers (e_phnum, or section 0's sh_info when e_phnum is PN_XNUM). */
  readonly phnum: number;
}

export interface DynamicArray {
  /** File offset and size of the array (PT_DYNAMIC's p_offset, p_filesz). */
  readonly offset: number;
  readonly vaddr: number;
  /**
   * How many entries the array holds in place: the live ones, the terminator and the DT_NULL slots
   * right after it. Slots past a non-DT_NULL entry after the terminator are not counted: a new tag
   * written before such an entry would make it live.
   */
  readonly capacity: number;
  /** The array's bytes as they are in the file, `capacity` entries (what an in-place edit diffs against). */
  readonly bytes: Uint8Array;
  /** The live entries: those before the first DT_NULL, in file order. */
  readonly entries: readonly DynamicEntry[];
  /** DT_NULL entries right after the terminating one: room for new tags without moving the array. */
  readonly spareSlots: number;
}

export interface ElfImage {
  readonly source: ByteSource;
  readonly codec: ElfCodec;
  readonly header: ElfHeader;
  readonly programHeaders: readonly ProgramHeader[];
  readonly dynamic: DynamicArray | null;
  /** PT_INTERP's path, as a byte string. */
  readonly interpreter: ByteString | null;
  /** The dynamic string table (DT_STRTAB/DT_STRSZ), read lazily. */
  readonly dynamicStrings: StringTable | null;
  /**
   * A debug-info file (`objcopy --only-keep-debug`, `eu-strip -f`): the program headers of a dynamic
   * executable or library, PT_DYNAMIC included, without the bytes they map. No loader ever loads it;
   * `dynamic`, `interpreter` and `dynamicStrings` are null.
   */
  readonly debugInfo: boolean;
}

const ELF_HEADER_READ = 64; // e_ident + the ELF64 header; ELF32 headers are 52 bytes.

export interface ReadOptions {
  /**
   * A PT_DYNAMIC without file bytes that is not a debug-info file's: 'error' (the default) refuses the
   * file as damaged, as an editor must (there is no array to edit); 'absent' reads it as glibc's loader
   * does — _dl_map_object_from_fd skips such a segment, so the object has no dynamic section
   * (`dynamic` is null) and the loader refuses it as a library.
   */
  readonly emptyDynamic?: 'error' | 'absent';
}

/** The file's first bytes, where the identification and the ELF header are (the first read of readElfImage). */
export function readHeaderBytes(source: ByteSource): Promise<Uint8Array> {
  return source.read(0, Math.min(ELF_HEADER_READ, source.size), 'ELF header');
}

/** Reads the header and the dynamic structures of an ELF file, with a few small positional reads. */
export async function readElfImage(source: ByteSource, options: ReadOptions = {}): Promise<ElfImage> {
  if (source.size === 0) throw malformedInput('empty file, not an ELF file');
  const ident = await readHeaderBytes(source);
  // A static library is the non-ELF file most often named by mistake: say what it is.
  if (fileKind(ident) === 'archive') throw malformedInput('an ar archive (static library), not an ELF file', 0);
  // A file shorter than the magic that starts as it does is a truncated ELF file, said so below.
  if (!startsWith(ident, ELF_MAGIC.subarray(0, Math.min(ident.length, ELF_MAGIC.length)))) {
    throw malformedInput('not an ELF file (no \\x7fELF magic)', 0);
  }
  if (source.size < EI_NIDENT) throw malformedInput(`truncated ELF file: ${source.size} bytes, shorter than e_ident`);
  const codec = codecFromIdent(ident);
  const headerSize = EI_NIDENT + codec.sizeOf(EHDR);
  if (ident.length < headerSize) throw malformedInput(`too short for an ELF${codec.elfClass} header (${source.size} bytes)`);
  const fields = codec.decode(EHDR, ident, EI_NIDENT);
  const programHeaders = await readProgramHeaders(source, codec, fields);
  // The fields go onto the decoded record, which is this read's own: a spread would copy it per file.
  const header: ElfHeader = Object.assign(fields, { osabi: ident[7] ?? 0, abiversion: ident[8] ?? 0, phnum: programHeaders.length });
  const table = { offset: fields.e_phoff, entrySize: codec.sizeOf(PHDR) };
  const dynamicHeader = onlyHeaderOfType(programHeaders, table, PT.PT_DYNAMIC, 'PT_DYNAMIC');
  const debugInfoImage: ElfImage = {
    source,
    codec,
    header,
    programHeaders,
    dynamic: null,
    interpreter: null,
    dynamicStrings: null,
    debugInfo: true,
  };
  if (dynamicHeader !== null && dynamicLeftOut(programHeaders, dynamicHeader)) return debugInfoImage;
  if (dynamicHeader !== null && dynamicHeader.p_filesz === 0 && options.emptyDynamic === 'absent') {
    return {
      source,
      codec,
      header,
      programHeaders,
      dynamic: null,
      interpreter: await readInterpreter(source, programHeaders, table),
      dynamicStrings: null,
      debugInfo: false,
    };
  }
  let dynamic: DynamicArray | null;
  try {
    dynamic = dynamicHeader === null ? null : await readDynamicArray(source, codec, dynamicHeader);
  } catch (error) {
    if (
      dynamicHeader !== null &&
      error instanceof CudaPatchelfError &&
      error.kind === 'format' &&
      (await dynamicSectionHasNoBytes(source, codec, fields, dynamicHeader))
    ) {
      return debugInfoImage;
    }
    throw error;
  }
  const interpreter = await readInterpreter(source, programHeaders, table);
  const dynamicStrings = dynamic === null ? null : locateDynamicStrings(source, codec, programHeaders, dynamic);
  return { source, codec, header, programHeaders, dynamic, interpreter, dynamicStrings, debugInfo: false };
}

/**
 * `objcopy --only-keep-debug` (Nixpkgs' separateDebugInfo) keeps every program header but empties the
 * allocated sections: PT_DYNAMIC and the PT_LOAD around it keep their p_memsz and get p_filesz 0. A
 * PT_DYNAMIC without file bytes at an address some PT_LOAD does map from the file is not that: the
 * loader finds the array there, and the file is read (and refused) as damaged.
 */
function dynamicLeftOut(programHeaders: readonly ProgramHeader[], dynamic: ProgramHeader): boolean {
  if (dynamic.p_filesz !== 0 || dynamic.p_memsz === 0) return false;
  return !programHeaders.some(
    (ph) => ph.p_type === PT.PT_LOAD && dynamic.p_vaddr >= ph.p_vaddr && dynamic.p_vaddr < ph.p_vaddr + ph.p_filesz,
  );
}

/**
 * `eu-strip -f` writes debug files whose program headers are the original's, unchanged: PT_DYNAMIC
 * names bytes of the other file, usually past the end of this one. Only when those bytes cannot be
 * read as a dynamic array are the section headers asked, as readelf and patchelf decide it: the
 * section at PT_DYNAMIC's address is SHT_NOBITS. Section headers that cannot be read say nothing.
 */
async function dynamicSectionHasNoBytes(
  source: ByteSource,
  codec: ElfCodec,
  fields: ElfHeaderFields,
  dynamic: ProgramHeader,
): Promise<boolean> {
  try {
    const sections = await readSectionHeaderTable(source, codec, fields);
    return sections.some((section) => section.sh_type === SHT.SHT_NOBITS && section.sh_addr === dynamic.p_vaddr && section.sh_size > 0);
  } catch (error) {
    if (error instanceof CudaPatchelfError) return false;
    throw error;
  }
}

/** Class and byte order from e_ident, or a format error saying why this is not an ELF file we read. */
function codecFromIdent(ident: Uint8Array): ElfCodec {
  const elfClass = ident[4];
  const data = ident[5];
  if (elfClass !== ELFCLASS32 && elfClass !== ELFCLASS64) throw malformedInput(`unknown ELF class ${elfClass} in e_ident[EI_CLASS]`, 4);
  if (data !== ELFDATA2LSB && data !== ELFDATA2MSB) throw malformedInput(`unknown byte order ${data} in e_ident[EI_DATA]`, 5);
  return new ElfCodec(elfClass === ELFCLASS64 ? 64 : 32, data === ELFDATA2LSB);
}

async function readProgramHeaders(source: ByteSource, codec: ElfCodec, fields: ElfHeaderFields): Promise<ProgramHeader[]> {
  let count = fields.e_phnum;
  if (count === 0) return [];
  const entrySize = codec.sizeOf(PHDR);
  if (fields.e_phentsize !== entrySize) {
    throw malformedInput(
      `e_phentsize is ${fields.e_phentsize}, expected ${entrySize} for ELF${codec.elfClass}`,
      EI_NIDENT + codec.fieldOffset(EHDR, 'e_phentsize'),
    );
  }
  if (count === PN_XNUM) count = await extendedProgramHeaderCount(source, codec, fields);
  checkRange(source.size, fields.e_phoff, count * entrySize, `program header table (${count} entries)`);
  const bytes = await source.read(fields.e_phoff, count * entrySize, 'program header table');
  const headers: ProgramHeader[] = [];
  for (let i = 0; i < count; i++) headers.push(codec.decode(PHDR, bytes, i * entrySize));
  return headers;
}

/** With e_phnum = PN_XNUM the real count is section header 0's sh_info (gABI "extended numbering"). */
async function extendedProgramHeaderCount(source: ByteSource, codec: ElfCodec, fields: ElfHeaderFields): Promise<number> {
  if (fields.e_shoff === 0)
    throw malformedInput(
      'e_phnum is PN_XNUM but there is no section header 0 holding the real count',
      EI_NIDENT + codec.fieldOffset(EHDR, 'e_phnum'),
    );
  const bytes = await source.read(fields.e_shoff, codec.sizeOf(SHDR), 'section header 0 (extended program header count)');
  return codec.decode(SHDR, bytes, 0).sh_info;
}

/** Where program header `index` sits in the file, for error messages. */
interface ProgramHeaderTable {
  readonly offset: number;
  readonly entrySize: number;
}

function onlyHeaderOfType(
  programHeaders: readonly ProgramHeader[],
  table: ProgramHeaderTable,
  type: number,
  name: string,
): ProgramHeader | null {
  let found: ProgramHeader | null = null;
  for (const [index, ph] of programHeaders.entries()) {
    if (ph.p_type !== type) continue;
    if (found !== null) {
      const count = programHeaders.filter((other) => other.p_type === type).length;
      throw malformedInput(`${count} ${name} program headers, expected at most one`, table.offset + index * table.entrySize);
    }
    found = ph;
  }
  return found;
}

async function readDynamicArray(source: ByteSource, codec: ElfCodec, ph: ProgramHeader): Promise<DynamicArray> {
  const entrySize = codec.sizeOf(DYN);
  const capacity = Math.floor(ph.p_filesz / entrySize);
  if (capacity === 0) throw malformedInput(`PT_DYNAMIC is ${ph.p_filesz} bytes, too small for one entry`, ph.p_offset);
  const bytes = await source.read(ph.p_offset, capacity * entrySize, 'dynamic array (PT_DYNAMIC)');
  const entries: DynamicEntry[] = [];
  let index = 0;
  for (; index < capacity; index++) {
    const entry = codec.decode(DYN, bytes, index * entrySize);
    if (entry.d_tag === DT.DT_NULL) break;
    entries.push(entry);
  }
  if (index === capacity) throw malformedInput('dynamic array has no DT_NULL terminator', ph.p_offset);
  let spareSlots = 0;
  for (let i = index + 1; i < capacity && codec.decode(DYN, bytes, i * entrySize).d_tag === DT.DT_NULL; i++) spareSlots++;
  const usable = index + 1 + spareSlots;
  return { offset: ph.p_offset, vaddr: ph.p_vaddr, capacity: usable, bytes: bytes.subarray(0, usable * entrySize), entries, spareSlots };
}

async function readInterpreter(
  source: ByteSource,
  programHeaders: readonly ProgramHeader[],
  table: ProgramHeaderTable,
): Promise<ByteString | null> {
  const ph = onlyHeaderOfType(programHeaders, table, PT.PT_INTERP, 'PT_INTERP');
  if (ph === null) return null;
  const bytes = await source.read(ph.p_offset, ph.p_filesz, 'interpreter path (PT_INTERP)');
  const nul = bytes.indexOf(0);
  if (nul < 0) throw malformedInput('interpreter path (PT_INTERP) has no NUL terminator', ph.p_offset);
  return bytesToByteString(bytes.subarray(0, nul));
}

/**
 * The file offset of `length` bytes at virtual address `vaddr`, through the PT_LOAD that maps them. A
 * range may run on into the next PT_LOAD when that one continues it in both address and file offset
 * (patchelf's output of non-PIE executables has .dynsym across such a boundary).
 */
export function fileOffsetOf(
  programHeaders: readonly ProgramHeader[],
  vaddr: number,
  length: number,
  what: string,
  namedAt?: number,
): number {
  // Addresses above 2^53 are rounded when decoded: range arithmetic on them is not exact and may not even
  // make progress, so such ranges and segments are treated as mapping nothing.
  const exact = (ph: ProgramHeader): boolean =>
    Number.isSafeInteger(ph.p_vaddr + ph.p_filesz) && Number.isSafeInteger(ph.p_offset + ph.p_filesz);
  const loads = programHeaders.filter((ph) => ph.p_type === PT.PT_LOAD && exact(ph));
  const first = loads.find(
    (ph) => vaddr >= ph.p_vaddr && vaddr <= ph.p_vaddr + ph.p_filesz && (length === 0 || vaddr < ph.p_vaddr + ph.p_filesz),
  );
  const outside = () =>
    malformedInput(
      `${what} (0x${length.toString(16)} bytes at address 0x${vaddr.toString(16)}) is not inside the file part of the PT_LOAD segments`,
      namedAt,
    );
  if (!Number.isSafeInteger(vaddr + length) || first === undefined) throw outside();
  const delta = first.p_offset - first.p_vaddr;
  let coveredEnd = first.p_vaddr + first.p_filesz;
  while (vaddr + length > coveredEnd) {
    const end = coveredEnd;
    const next = loads.find((ph) => ph.p_vaddr === end && ph.p_offset - ph.p_vaddr === delta && ph.p_filesz > 0);
    if (next === undefined) throw outside();
    coveredEnd = next.p_vaddr + next.p_filesz;
  }
  return first.p_offset + (vaddr - first.p_vaddr);
}

/** The value of the first dynamic entry with this tag. */
export function dynamicValue(dynamic: DynamicArray, tag: number): number | undefined {
  return dynamic.entries.find((entry) => entry.d_tag === tag)?.d_val;
}

function locateDynamicStrings(
  source: ByteSource,
  codec: ElfCodec,
  programHeaders: readonly ProgramHeader[],
  dynamic: DynamicArray,
): StringTable | null {
  const address = dynamicValue(dynamic, DT.DT_STRTAB);
  const size = dynamicValue(dynamic, DT.DT_STRSZ);
  if (address === undefined && size === undefined) return null;
  if (address === undefined || size === undefined) {
    throw malformedInput(
      `dynamic array has ${address === undefined ? 'DT_STRSZ without DT_STRTAB' : 'DT_STRTAB without DT_STRSZ'}`,
      dynamic.offset,
    );
  }
  const strtabAt = dynamic.offset + dynamic.entries.findIndex((entry) => entry.d_tag === DT.DT_STRTAB) * codec.sizeOf(DYN);
  const offset = fileOffsetOf(programHeaders, address, size, 'dynamic string table (DT_STRTAB, DT_STRSZ)', strtabAt);
  checkRange(source.size, offset, size, 'dynamic string table');
  return new StringTable(source, offset, size, 'dynamic string table');
}

/** The strings of all dynamic entries with this tag (DT_NEEDED, DT_RUNPATH…), in order. */
export async function dynamicStringsOf(image: ElfImage, tag: number): Promise<ByteString[]> {
  if (image.dynamic === null) return [];
  const entries = image.dynamic.entries.filter((entry) => entry.d_tag === tag);
  if (entries.length === 0) return [];
  if (image.dynamicStrings === null) {
    throw malformedInput('dynamic array names strings but has no DT_STRTAB', image.dynamic.offset);
  }
  const strings = image.dynamicStrings;
  return Promise.all(entries.map((entry) => strings.get(entry.d_val)));
}

/**
 * The string of the last entry with this tag (DT_RUNPATH, DT_RPATH, DT_SONAME), or null: the loader
 * keeps the last of a repeated tag (glibc's elf_get_dynamic_info stores each over the one before), and
 * patchelf reads that one too.
 */
export async function lastDynamicString(image: ElfImage, tag: number): Promise<ByteString | null> {
  return (await dynamicStringsOf(image, tag)).at(-1) ?? null;
}
