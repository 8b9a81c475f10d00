// Tier 4, the whole-file rewrite: for an executable whose program header table can neither grow where
// it is nor move to where the kernel looks for it, a new file gets a first page of its own for the ELF
// header and the table, and the old file follows it whole. Pure: it says what the new file's first
// page holds and which headers change; edit-file.ts plans the edit itself on that new file, where the
// table then has room to grow in place, and src/write/rewrite-file.ts writes it and renames it over.
//
// The first page is mapped by one more PT_LOAD just below the lowest segment, so that every way a
// loader finds the table agrees: Linux before 5.18 takes the first PT_LOAD's p_vaddr - p_offset +
// e_phoff, qemu-user the lowest p_vaddr - p_offset of all PT_LOADs plus e_phoff, Linux 5.18 and glibc
// PT_PHDR. Only a fixed-address executable (ET_EXEC) has addresses free below its lowest segment; a
// position-independent one starts at address 0.

import {
  EHDR,
  EI_NIDENT,
  ELF_MAGIC,
  ELFCLASS32,
  ELFCLASS64,
  ELFDATA2LSB,
  ELFDATA2MSB,
  ET,
  EV_CURRENT,
  machinePageSize,
  PF_R,
  PHDR,
  type ProgramHeader,
  PT,
  SHDR,
  SHT,
} from '../elf/elf.js';
import type { EditFacts } from './edit-facts.js';
import { unsupported, type PlannedWrite, type Unsupported } from './plan.js';
import { alignUp } from './region.js';

/** The lowest address Linux maps by default (vm.mmap_min_addr). */
const MIN_MAP_ADDRESS = 0x10000;

/** Program header slots the new first page leaves free after the table, for this edit and later ones. */
const SPARE_TABLE_SLOTS = 8;

export interface ShiftedFile {
  readonly kind: 'shifted';
  /** Bytes the old file moves by: it starts at this offset of the new file, after the new first page. */
  readonly shift: number;
  /** The new file's size before the edit: the first page and the old file. */
  readonly size: number;
  /** The ELF header, the program header table and the section headers of the new file. */
  readonly writes: readonly PlannedWrite[];
}

/**
 * Lays out the new file, or refuses it: `why` (the reason the append tier gave up) and the reason a
 * rewrite cannot help either.
 */
export function shiftForRewrite(facts: EditFacts, why: string): ShiftedFile | Unsupported {
  const { codec, header, programHeaders } = facts;
  const refuse = (reason: string): Unsupported => unsupported(`${why}; nor can a whole-file rewrite help: ${reason}`);
  if (header.e_type !== ET.ET_EXEC) return refuse('a position-independent file has no addresses free below its first segment');
  const pageSize = machinePageSize(header.e_machine);
  const loads = programHeaders.filter((ph) => ph.p_type === PT.PT_LOAD);
  // Every PT_LOAD moves by `shift` in the file: its p_vaddr - p_offset drops by as much.
  const base = Math.min(...loads.map((ph) => ph.p_vaddr - ph.p_offset));
  const entrySize = codec.sizeOf(PHDR);
  const count = programHeaders.length + 1;
  if (count + SPARE_TABLE_SLOTS >= 0xffff) return refuse('the program header table is full (PN_XNUM)');
  const shift = alignUp(header.e_ehsize + (count + SPARE_TABLE_SLOTS) * entrySize, pageSize);
  const firstPage = base - shift;
  if (base % pageSize !== 0 || firstPage < MIN_MAP_ADDRESS) {
    return refuse(`no page-aligned room below the lowest segment (0x${base.toString(16)}) for the headers`);
  }

  const tableSize = count * entrySize;
  const headerLoad: ProgramHeader = {
    p_type: PT.PT_LOAD,
    p_flags: PF_R,
    p_offset: 0,
    p_vaddr: firstPage,
    p_paddr: firstPage,
    p_filesz: shift,
    p_memsz: shift,
    p_align: pageSize,
  };
  const moved = programHeaders.map((ph): ProgramHeader => {
    if (ph.p_type === PT.PT_PHDR) {
      const vaddr = firstPage + header.e_ehsize;
      return { ...ph, p_offset: header.e_ehsize, p_vaddr: vaddr, p_paddr: vaddr, p_filesz: tableSize, p_memsz: tableSize };
    }
    // Entries with no bytes in the file (PT_GNU_STACK) keep their offset.
    return ph.p_filesz > 0 || ph.p_type === PT.PT_LOAD ? { ...ph, p_offset: ph.p_offset + shift } : ph;
  });
  // PT_LOADs stay in ascending p_vaddr order: the new one, lowest, goes before the first of them.
  const firstLoad = moved.findIndex((ph) => ph.p_type === PT.PT_LOAD);
  const table = [...moved.slice(0, firstLoad), headerLoad, ...moved.slice(firstLoad)];

  const ident = new Uint8Array(EI_NIDENT);
  ident.set([
    ...ELF_MAGIC,
    codec.elfClass === 64 ? ELFCLASS64 : ELFCLASS32,
    codec.littleEndian ? ELFDATA2LSB : ELFDATA2MSB,
    EV_CURRENT,
    header.osabi,
    header.abiversion,
  ]);
  const elfHeader = new Uint8Array(EI_NIDENT + codec.sizeOf(EHDR));
  elfHeader.set(ident);
  const shoff = header.e_shoff === 0 ? 0 : header.e_shoff + shift;
  codec.encode(EHDR, { ...header, e_phoff: header.e_ehsize, e_phnum: table.length, e_shoff: shoff }, elfHeader, EI_NIDENT);

  const writes: PlannedWrite[] = [
    { phase: 'data', offset: 0, bytes: elfHeader, what: 'ELF header of the rewritten file' },
    { phase: 'data', offset: header.e_ehsize, bytes: codec.encodeRecords(PHDR, table), what: 'program header table of the rewritten file' },
  ];
  if (facts.sections.length > 0) {
    const sections = facts.sections.map((s) => (s.sh_type === SHT.SHT_NULL ? s : { ...s, sh_offset: s.sh_offset + shift }));
    writes.push({
      phase: 'data',
      offset: shoff,
      bytes: codec.encodeRecords(SHDR, sections),
      what: 'section headers of the rewritten file',
    });
  }
  return { kind: 'shifted', shift, size: facts.fileSize + shift, writes };
}
