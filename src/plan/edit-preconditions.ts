// What a file must satisfy before the rewriter touches it. The reader accepts more (print shows odd
// files as they are), but an edit re-encodes program headers and dynamic entries from their decoded
// values and places new data by the segments' addresses: values it cannot carry over exactly, and
// segments or tags that contradict each other, are refused up front and the file is left alone.

import { malformedInput } from '../errors/cuda-patchelf-error.js';
import {
  ADDRESS_TAGS,
  DT,
  DT_NAMES,
  type DynamicArray,
  nameOf,
  PHDR,
  type ProgramHeader,
  PT,
  RELOCATABLE_SECTION_TAGS,
} from '../elf/elf.js';

/** Tags that say where one structure is: a second one would leave the rewriter two answers. */
const ONE_PER_FILE_TAGS: ReadonlySet<number> = new Set([
  DT.DT_STRTAB,
  DT.DT_STRSZ,
  DT.DT_SYMTAB,
  DT.DT_SYMENT,
  DT.DT_HASH,
  DT.DT_GNU_HASH,
  DT.DT_VERSYM,
  DT.DT_VERNEED,
  DT.DT_VERNEEDNUM,
  DT.DT_VERDEF,
  DT.DT_VERDEFNUM,
]);

const PROGRAM_HEADER_FIELDS = PHDR.fields64.map(([field]) => field);

/**
 * Decoded 64-bit values above 2^53 are rounded (JavaScript numbers); no real address, size or tag
 * comes near, so such a value is a corrupt field, not one to round and write back. (The checks run on
 * every file of a tree: the message is built only on failure.)
 */
function beyondExact(what: string): Error {
  return malformedInput(`${what} is beyond 2^53, which no real file has; refusing to rewrite it`);
}

/** What the checks look at besides the program headers and the dynamic array. */
export interface EditableFile {
  readonly fileSize: number;
  /** The ELF header's size, and where the program header table is: [phoff, phEnd). */
  readonly ehsize: number;
  readonly phoff: number;
  readonly phEnd: number;
  readonly dynstr: { readonly offset: number; readonly vaddr: number; readonly bytes: Uint8Array };
}

export function checkEditable(programHeaders: readonly ProgramHeader[], dynamic: DynamicArray, file: EditableFile): void {
  for (const [index, ph] of programHeaders.entries()) {
    for (const field of PROGRAM_HEADER_FIELDS)
      if (!Number.isSafeInteger(ph[field])) throw beyondExact(`program header ${index}'s ${field}`);
    if (!Number.isSafeInteger(ph.p_vaddr + ph.p_memsz)) throw beyondExact(`the end of program header ${index}'s memory range`);
    if (!Number.isSafeInteger(ph.p_offset + ph.p_filesz)) throw beyondExact(`the end of program header ${index}'s file range`);
  }
  const counts = new Map<number, number>();
  for (const [index, entry] of dynamic.entries.entries()) {
    if (!Number.isSafeInteger(entry.d_tag)) throw beyondExact(`dynamic entry ${index}'s d_tag`);
    if (!Number.isSafeInteger(entry.d_val)) throw beyondExact(`dynamic entry ${index} (${nameOf(DT_NAMES, entry.d_tag)})'s d_val`);
    if (ONE_PER_FILE_TAGS.has(entry.d_tag)) counts.set(entry.d_tag, (counts.get(entry.d_tag) ?? 0) + 1);
  }
  for (const tag of ONE_PER_FILE_TAGS) {
    const count = counts.get(tag) ?? 0;
    if (count > 1)
      throw malformedInput(`the dynamic array has ${count} ${nameOf(DT_NAMES, tag)} entries, expected at most one`, dynamic.offset);
  }
  checkLoadSegments(programHeaders, file.fileSize);
  checkStringTable(dynamic, file);
  checkTablesOutsideHeaders(programHeaders, dynamic, file);
}

/**
 * The tables that refer into the string table (hash tables, .dynsym, version records) must not lie in
 * the ELF header or the program header table: an edit rewrites those bytes, and the version need a
 * tag found there would then name a string past the end of the table (fuzz seed 11, iteration 167167).
 */
function checkTablesOutsideHeaders(programHeaders: readonly ProgramHeader[], dynamic: DynamicArray, file: EditableFile): void {
  const inHeaders = (offset: number): boolean => offset < file.ehsize || (offset >= file.phoff && offset < file.phEnd);
  for (const entry of dynamic.entries) {
    if (!RELOCATABLE_SECTION_TAGS.includes(entry.d_tag)) continue;
    const offset = mappedOffset(programHeaders, entry.d_val);
    if (offset !== null && inHeaders(offset)) {
      throw malformedInput(
        `${nameOf(DT_NAMES, entry.d_tag)} (0x${entry.d_val.toString(16)}) points into the ELF or program headers, which an edit rewrites`,
        dynamic.offset,
      );
    }
  }
}

/** The file offset a PT_LOAD maps `vaddr` from, or null when none maps it from the file. */
function mappedOffset(programHeaders: readonly ProgramHeader[], vaddr: number): number | null {
  const load = programHeaders.find((ph) => ph.p_type === PT.PT_LOAD && vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz);
  return load === undefined ? null : load.p_offset + (vaddr - load.p_vaddr);
}

/**
 * gABI: a string table's first and last bytes are NUL (index 0 is the empty string). And the table
 * must not lie over the headers, the dynamic array or another table a tag points at: the rewriter
 * overwrites dead strings with zeros and writes those structures separately.
 */
function checkStringTable(dynamic: DynamicArray, file: EditableFile): void {
  const { offset, vaddr, bytes } = file.dynstr;
  if (bytes.length === 0 || bytes[0] !== 0 || bytes[bytes.length - 1] !== 0) {
    throw malformedInput('the dynamic string table does not start and end with a NUL byte (DT_STRTAB or DT_STRSZ is off)', offset);
  }
  const overlaps = (start: number, end: number): boolean => offset < end && start < offset + bytes.length;
  if (overlaps(0, file.ehsize) || overlaps(file.phoff, file.phEnd))
    throw malformedInput('the dynamic string table lies over the ELF or program headers', offset);
  if (overlaps(dynamic.offset, dynamic.offset + dynamic.bytes.length))
    throw malformedInput('the dynamic string table lies over the dynamic array', offset);
  const inside = dynamic.entries.find(
    (entry) =>
      entry.d_tag !== DT.DT_STRTAB && ADDRESS_TAGS.includes(entry.d_tag) && entry.d_val >= vaddr && entry.d_val < vaddr + bytes.length,
  );
  if (inside !== undefined) {
    throw malformedInput(
      `${nameOf(DT_NAMES, inside.d_tag)} (0x${inside.d_val.toString(16)}) points inside the dynamic ` +
        'string table (DT_STRSZ is too large or the tag is off)',
      offset,
    );
  }
}

/**
 * gABI: PT_LOAD entries are sorted by p_vaddr, and p_filesz may not exceed p_memsz. A segment that
 * overlaps the next in memory or maps bytes past the end of the file would make the addresses the
 * planner hands out, and the file offsets it looks them up at, ambiguous.
 */
function checkLoadSegments(programHeaders: readonly ProgramHeader[], fileSize: number): void {
  let previous: { ph: ProgramHeader; index: number } | null = null;
  for (const [index, ph] of programHeaders.entries()) {
    if (ph.p_type !== PT.PT_LOAD) continue;
    if (ph.p_filesz > ph.p_memsz)
      throw malformedInput(`PT_LOAD ${index} has p_filesz 0x${ph.p_filesz.toString(16)} above its p_memsz 0x${ph.p_memsz.toString(16)}`);
    if (ph.p_offset + ph.p_filesz > fileSize) {
      throw malformedInput(
        `PT_LOAD ${index} maps bytes up to 0x${(ph.p_offset + ph.p_filesz).toString(16)}, past the end ` +
          `of the file (0x${fileSize.toString(16)})`,
      );
    }
    if (previous !== null && previous.ph.p_vaddr + previous.ph.p_memsz > ph.p_vaddr) {
      throw malformedInput(
        `PT_LOAD ${index} (at 0x${ph.p_vaddr.toString(16)}) is not above PT_LOAD ${previous.index}, ` +
          `which ends at 0x${(previous.ph.p_vaddr + previous.ph.p_memsz).toString(16)}`,
      );
    }
    previous = { ph, index };
  }
}
