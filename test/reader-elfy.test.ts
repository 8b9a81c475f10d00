// The reader agrees with elfy, an independent ELF parser, on the ELF header, the program headers and the
// section headers of every fixture.
//
// What elfy reads wrong, and so is left out:
// - ELF64 sh_addralign/sh_entsize: read at offsets 46/54 instead of 48/56 (compared for ELF32, where
//   elfy reads them right).
// - EI_OSABI/EI_ABIVERSION: read from e_ident[6]/[7] instead of [7]/[8].
// - Files without section headers: elfy throws looking up the section name table (asserted below, so
//   an exclusion is a checked fact, not an assumption).

import { readFile } from 'node:fs/promises';
import elfy, { type ElfyFile } from 'elfy';
import { describe, expect, it } from 'vitest';
import { FileByteSource } from '../src/elf/byte-source.js';
import { byteStringToText } from '../src/elf/byte-string.js';
import { readElfImage, type ElfImage } from '../src/elf/elf-image.js';
import { readSectionHeaders, type Section } from '../src/elf/section-headers.js';
import { fixtures } from './helpers/fixtures.js';
import { pickFields } from './helpers/pick-fields.js';

/** elfy's rendering of a flags word (its `mapFlags`, 32-bit shifts included), applied to our value. */
function elfyFlags(value: number, names: Record<number, string>): Record<string, true> {
  const out: Record<string, true> = {};
  for (let bit = 1; (value < 0 || bit <= value) && bit !== 0; bit <<= 1) {
    if ((value & bit) !== 0) out[names[bit] ?? String(bit)] = true;
  }
  return out;
}

const c = elfy.constants;

/** The fields of elfy's header, program headers and sections that are compared (it reads the others wrong or has no counterpart). */
const HEADER_FIELDS = [
  'class',
  'endian',
  'type',
  'machine',
  'version',
  'entry',
  'phoff',
  'shoff',
  'flags',
  'ehsize',
  'phentsize',
  'phnum',
  'shentsize',
  'shnum',
  'shstrndx',
] as const;
const PROGRAM_FIELDS = ['type', 'offset', 'vaddr', 'paddr', 'filesz', 'memsz', 'flags', 'align'] as const;
/** sh_addralign and sh_entsize are compared only for ELF32: elfy reads ELF64's at the wrong offsets. */
const SECTION_FIELDS = ['name', 'type', 'flags', 'addr', 'off', 'size', 'link', 'info'] as const;

function expectedHeader(image: ElfImage): Partial<ElfyFile> {
  const h = image.header;
  return {
    class: image.codec.elfClass === 64 ? '64' : '32',
    endian: image.codec.littleEndian ? 'lsb' : 'msb',
    type: c.type[h.e_type],
    machine: c.machine[h.e_machine],
    version: h.e_version,
    entry: h.e_entry,
    phoff: h.e_phoff,
    shoff: h.e_shoff,
    flags: h.e_flags,
    ehsize: h.e_ehsize,
    phentsize: h.e_phentsize,
    phnum: h.e_phnum,
    shentsize: h.e_shentsize,
    shnum: h.e_shnum,
    shstrndx: h.e_shstrndx,
  };
}

function expectedSection(image: ElfImage, s: Section): Record<string, unknown> {
  return {
    name: byteStringToText(s.name),
    type: c.sectType[s.sh_type] ?? s.sh_type,
    flags: elfyFlags(s.sh_flags, c.sectFlags),
    addr: s.sh_addr,
    off: s.sh_offset,
    size: s.sh_size,
    link: s.sh_link,
    info: s.sh_info,
    ...(image.codec.elfClass === 32 ? { addralign: s.sh_addralign, entsize: s.sh_entsize } : {}),
  };
}

interface Outcome {
  compared: boolean;
  elfClass: 32 | 64;
  littleEndian: boolean;
  sections: number;
  programs: number;
}

const all = fixtures();
const outcomes = new Map<string, Outcome>();

describe('reader agrees with elfy', () => {
  describe.each(all.map((f) => ({ id: f.id, path: f.path })))('$id', ({ path }) => {
    it('ELF header, program headers, section headers', async () => {
      const source = FileByteSource.open(path);
      let image: ElfImage;
      let sections: Section[];
      try {
        image = await readElfImage(source);
        sections = await readSectionHeaders(image);
      } finally {
        source.close();
      }
      const outcome: Outcome = {
        compared: false,
        elfClass: image.codec.elfClass,
        littleEndian: image.codec.littleEndian,
        sections: sections.length,
        programs: image.programHeaders.length,
      };
      outcomes.set(path, outcome);

      const buffer = await readFile(path);
      if (image.header.e_shoff === 0 || image.header.e_shnum === 0) {
        expect(sections).toEqual([]);
        expect(() => elfy.parse(buffer), 'elfy cannot read a file without section headers').toThrow();
        return;
      }
      const theirs = elfy.parse(buffer);

      expect(pickFields(theirs, HEADER_FIELDS)).toEqual(expectedHeader(image));

      expect(theirs.body.programs.map((program) => pickFields(program, PROGRAM_FIELDS))).toEqual(
        image.programHeaders.map((ph) => ({
          type: c.entryType[ph.p_type],
          offset: ph.p_offset,
          vaddr: ph.p_vaddr,
          paddr: ph.p_paddr,
          filesz: ph.p_filesz,
          memsz: ph.p_memsz,
          flags: elfyFlags(ph.p_flags, c.entryFlags),
          align: ph.p_align,
        })),
      );

      const elfy32 = image.codec.elfClass === 32;
      expect(
        theirs.body.sections.map((section) => pickFields(section, elfy32 ? [...SECTION_FIELDS, 'addralign', 'entsize'] : SECTION_FIELDS)),
      ).toEqual(sections.map((s) => expectedSection(image, s)));
      expect(sections.length).toBeGreaterThan(0);
      outcome.compared = true;
    });
  });

  it('compared enough files of every class and byte order', () => {
    expect(outcomes.size).toBe(all.length);
    const compared = [...outcomes.values()].filter((o) => o.compared);
    expect(compared.length).toBeGreaterThanOrEqual(Math.max(5, Math.ceil(all.length * 0.8)));
    const kinds = new Set(compared.map((o) => `ELF${o.elfClass} ${o.littleEndian ? 'LE' : 'BE'}`));
    expect([...kinds].sort()).toEqual(expect.arrayContaining(['ELF32 LE', 'ELF64 BE', 'ELF64 LE']));
    expect(compared.reduce((n, o) => n + o.sections, 0)).toBeGreaterThan(compared.length * 10);
  });
});
