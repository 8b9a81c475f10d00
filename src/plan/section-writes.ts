// The section headers of what an edit moved, and the .symtab symbols defined in those sections: tools
// only (readelf, strip, debuggers), never the loader, so they come after the cleanup (plan.ts).

import { byteStringToText, dataViewOf, type Section, SHDR, SHT, SYM } from '../elf/elf.js';
import type { EditFacts } from './edit-facts.js';
import type { PlannedWrite } from './plan.js';
import type { SectionRepair } from './resume-edit.js';
import type { MovedRange } from './segment-layout.js';

/** Where a table is after the edit. */
interface MovedTable {
  readonly offset: number;
  readonly vaddr: number;
  readonly size: number;
}

/**
 * What moved, for the section headers: tables the edit moved or grew, repairs of an edit cut short, ranges moved out of the
 * table's way.
 */
interface SectionMoves {
  readonly repairs: readonly SectionRepair[];
  /** The string table, moved or grown; null when it stays as it is. */
  readonly table: MovedTable | null;
  /** The dynamic array, moved; null when it stays. */
  readonly dynamic: MovedTable | null;
  /** The interpreter path, moved into the appended region; null when it stays. */
  readonly interpreter: MovedTable | null;
  readonly moved: readonly MovedRange[];
}

/** Section headers follow what moved, so that readelf, strip and debuggers see the new places; so do the .symtab symbols in them. */
export function sectionWrites(facts: EditFacts, moves: SectionMoves): PlannedWrite[] {
  const writes: PlannedWrite[] = [];
  /** Address delta of each moved section, by section index. */
  const moved = new Map<number, number>();
  const update = (section: Section, fields: Partial<Section>, what: string): void => {
    const bytes = new Uint8Array(facts.codec.sizeOf(SHDR));
    facts.codec.encode(SHDR, { ...section, ...fields }, bytes, 0);
    writes.push({ phase: 'sections', offset: section.headerOffset, bytes, what });
    if (fields.sh_addr !== undefined && fields.sh_addr !== section.sh_addr) moved.set(section.index, fields.sh_addr - section.sh_addr);
  };
  // Repairs first: a header this edit moves again is written once more, later in the same phase.
  for (const { section, fields } of moves.repairs)
    update(section, fields, `section header of ${byteStringToText(section.name)}, as the tags say`);
  for (const section of facts.sections) {
    if (moves.interpreter !== null && isInterpreterSection(section)) {
      update(
        section,
        { sh_offset: moves.interpreter.offset, sh_addr: moves.interpreter.vaddr, sh_size: moves.interpreter.size },
        'section header of .interp',
      );
    } else if (
      moves.table !== null &&
      section.sh_type === SHT.SHT_STRTAB &&
      section.sh_offset === facts.dynstr.offset &&
      section.sh_addr === facts.dynstr.vaddr
    ) {
      update(
        section,
        { sh_offset: moves.table.offset, sh_addr: moves.table.vaddr, sh_size: moves.table.size },
        'section header of .dynstr',
      );
    } else if (moves.dynamic !== null && section.sh_type === SHT.SHT_DYNAMIC) {
      update(
        section,
        { sh_offset: moves.dynamic.offset, sh_addr: moves.dynamic.vaddr, sh_size: moves.dynamic.size },
        'section header of .dynamic',
      );
    } else {
      const range = moves.moved.find(
        (m) => section.sh_size > 0 && section.sh_offset >= m.from && section.sh_offset + section.sh_size <= m.from + m.size,
      );
      if (range !== undefined) {
        update(
          section,
          { sh_offset: section.sh_offset + (range.to - range.from), sh_addr: section.sh_addr + range.vaddrDelta },
          `section header of ${byteStringToText(section.name)}`,
        );
      }
    }
  }
  return [...writes, ...symbolWrites(facts, moved)];
}

/** The section that holds the interpreter path, as linkers name it. */
export function isInterpreterSection(section: Section): boolean {
  return section.name === '.interp' && section.sh_type === SHT.SHT_PROGBITS;
}

/** Symbols defined in a moved section (its section symbol, _DYNAMIC) follow it in .symtab. */
function symbolWrites(facts: EditFacts, moved: ReadonlyMap<number, number>): PlannedWrite[] {
  if (facts.symbolTable === null || moved.size === 0) return [];
  // planEdit asked for the bytes (NeedsFacts) whenever a section can move.
  const { offset, bytes } = facts.symbolTable;
  if (bytes === null) throw new Error('planEdit: sections moved, but the .symtab bytes were not asked for');
  const size = facts.codec.sizeOf(SYM);
  // Only st_shndx is looked at for every symbol (unstripped files have tens of thousands).
  const shndxAt = facts.codec.fieldOffset(SYM, 'st_shndx');
  const view = dataViewOf(bytes);
  const writes: PlannedWrite[] = [];
  for (let at = 0; at + size <= bytes.length; at += size) {
    const delta = moved.get(view.getUint16(at + shndxAt, facts.codec.littleEndian));
    if (delta === undefined) continue;
    const symbol = facts.codec.decode(SYM, bytes, at);
    const record = bytes.slice(at, at + size);
    facts.codec.encode(SYM, { st_value: symbol.st_value + delta }, record, 0);
    writes.push({ phase: 'sections', offset: offset + at, bytes: record, what: 'symbol in a moved section (.symtab)' });
  }
  return writes;
}
