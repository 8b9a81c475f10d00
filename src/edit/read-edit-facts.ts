// Reading the planner's input (src/plan/edit-facts.ts) from an open image: everything planning needs,
// read up front, so that planning itself is pure.

import { CudaPatchelfError, malformedInput } from '../errors/cuda-patchelf-error.js';
import {
  ADDRESS_TAGS,
  type ByteSource,
  byteStringToText,
  checkRange,
  DT,
  type DynamicArray,
  dynamicValue,
  type ElfImage,
  type ProgramHeader,
  PT,
  readDynamicSymbols,
  readSectionHeaders,
  readStringReferences,
  RELOCATABLE_SECTION_TAGS,
  type Section,
  SHT,
} from '../elf/elf.js';
import { checkEditable } from '../plan/edit-preconditions.js';
import type { EditFacts, InterpreterFact, LaterFact, MovableRange } from '../plan/edit-facts.js';

/**
 * Whether a PT_INTERP or PT_NOTE segment covers more than the interpreter name or the notes: an
 * address a dynamic tag points at, or a section that is neither a note nor .interp. Such a segment
 * (a corrupt size) is not moved out of the table's way: what it covers is not its own to move.
 */
function holdsMoreThanItself(ph: ProgramHeader, dynamic: DynamicArray, sections: readonly Section[]): boolean {
  const inside = (vaddr: number): boolean => vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz;
  if (dynamic.entries.some((entry) => ADDRESS_TAGS.includes(entry.d_tag) && inside(entry.d_val))) return true;
  return sections.some(
    (section) =>
      section.sh_type !== SHT.SHT_NOTE &&
      section.name !== '.interp' &&
      section.sh_type !== SHT.SHT_NULL &&
      section.sh_type !== SHT.SHT_NOBITS &&
      section.sh_size > 0 &&
      section.sh_offset < ph.p_offset + ph.p_filesz &&
      ph.p_offset < section.sh_offset + section.sh_size,
  );
}

/** PT_INTERP as planning needs it: where the path is, and how much room it has in place. */
async function readInterpreterFact(image: ElfImage): Promise<InterpreterFact | null> {
  const index = image.programHeaders.findIndex((ph) => ph.p_type === PT.PT_INTERP);
  const ph = image.programHeaders[index];
  if (image.interpreter === null || ph === undefined) return null;
  const bytes = await image.source.read(ph.p_offset, ph.p_filesz, 'interpreter path (PT_INTERP)');
  const used = image.interpreter.length + 1;
  const room = bytes.subarray(used).every((byte) => byte === 0) ? ph.p_filesz : used;
  return { index, offset: ph.p_offset, vaddr: ph.p_vaddr, size: ph.p_filesz, text: image.interpreter, room };
}

/** A .symtab larger than this is left as it is when sections move (tools-only data). */
const SYMBOL_TABLE_LIMIT = 64 * 2 ** 20;

/**
 * The facts a plan starts from. The .dynsym entries and the .symtab bytes are located but not read: a
 * plan asks for them (NeedsFacts, readLaterFact) only when it needs them. `purpose` 'check' reads an
 * edited file back: everything is located and checked as for planning, but the bytes only planning
 * uses (the ranges the table may grow over, the bytes after it) are not read. Such facts are not for
 * planning.
 */
export async function readEditFacts(image: ElfImage, purpose: 'plan' | 'check' = 'plan'): Promise<EditFacts> {
  const { source, header, programHeaders, dynamic, dynamicStrings, codec } = image;
  if (image.debugInfo)
    throw new CudaPatchelfError('unsupported', 'a debug-info file (objcopy --only-keep-debug): it has no dynamic section to edit');
  if (dynamic === null) throw malformedInput('no dynamic section (PT_DYNAMIC): a statically linked file, nothing to edit');
  if (dynamicStrings === null) throw malformedInput('dynamic array has no string table (DT_STRTAB)', dynamic.offset);
  const dynstrBytes = await dynamicStrings.readAll();
  const strtabAddress = dynamicValue(dynamic, DT.DT_STRTAB) ?? 0;
  const tableEnd = header.e_phoff + header.phnum * header.e_phentsize;
  checkEditable(programHeaders, dynamic, {
    fileSize: source.size,
    ehsize: header.e_ehsize,
    phoff: header.e_phoff,
    phEnd: tableEnd,
    dynstr: { offset: dynamicStrings.offset, vaddr: strtabAddress, bytes: dynstrBytes },
  });
  const sections = await readSectionHeaders(image);
  const bytesOf = async (offset: number, length: number, what: string): Promise<Uint8Array> => {
    if (purpose === 'plan') return source.read(offset, length, what);
    checkRange(source.size, offset, length, what);
    return new Uint8Array(0);
  };
  const movableRanges: MovableRange[] = [];
  for (const ph of programHeaders) {
    if (ph.p_type !== PT.PT_INTERP && ph.p_type !== PT.PT_NOTE) continue;
    if (movableRanges.some((range) => range.offset === ph.p_offset) || holdsMoreThanItself(ph, dynamic, sections)) continue;
    movableRanges.push({ offset: ph.p_offset, bytes: await bytesOf(ph.p_offset, ph.p_filesz, 'interpreter or note segment') });
  }
  const symtab = sections.find(
    (section) => section.sh_type === SHT.SHT_SYMTAB && section.sh_size > 0 && section.sh_size <= SYMBOL_TABLE_LIMIT,
  );
  if (symtab !== undefined) checkRange(source.size, symtab.sh_offset, symtab.sh_size, 'symbol table (.symtab)');
  const tagged = new Set(RELOCATABLE_SECTION_TAGS.map((tag) => dynamicValue(dynamic, tag)).filter((value) => value !== undefined));
  const relocatableSections: MovableRange[] = [];
  for (const section of sections) {
    const nextToTable = section.sh_offset < tableEnd + header.e_phentsize && section.sh_offset + section.sh_size > tableEnd;
    const inFile = section.sh_offset + section.sh_size <= source.size;
    if (!nextToTable || !inFile || section.sh_type === SHT.SHT_NOBITS || !tagged.has(section.sh_addr)) continue;
    relocatableSections.push({
      offset: section.sh_offset,
      bytes: await bytesOf(section.sh_offset, section.sh_size, `section ${byteStringToText(section.name)}`),
    });
  }
  // The table grows by one entry at most: the planner looks that far past it for room.
  const after = Math.max(0, Math.min(header.e_phentsize, source.size - tableEnd));
  return {
    fileSize: source.size,
    codec,
    header,
    programHeaders,
    dynamic,
    dynstr: { offset: dynamicStrings.offset, vaddr: strtabAddress, bytes: dynstrBytes },
    references: await readStringReferences(image, sections),
    interpreter: await readInterpreterFact(image),
    sections,
    movableRanges,
    relocatableSections,
    afterProgramHeaders: await bytesOf(tableEnd, after, 'bytes after the program header table'),
    symbolTable: symtab === undefined ? null : { offset: symtab.sh_offset, size: symtab.sh_size, bytes: null },
    largestSymbolSize: null,
  };
}

/** The facts with one that was left out read in (what a NeedsFacts decision asks for). */
export async function readLaterFact(source: ByteSource, facts: EditFacts, fact: LaterFact): Promise<EditFacts> {
  if (fact === 'dynamic-symbols') {
    const symbols = await readDynamicSymbols(source, facts.codec, facts.references.dynamicSymbols);
    return { ...facts, references: { ...facts.references, symbolNames: symbols.names }, largestSymbolSize: symbols.largestSize };
  }
  const table = facts.symbolTable;
  if (table === null) return facts;
  return { ...facts, symbolTable: { ...table, bytes: await source.read(table.offset, table.size, 'symbol table (.symtab)') } };
}
