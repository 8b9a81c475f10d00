// The writes that put the appended region in place and map it, made from its layout
// (segment-layout.ts): the region's bytes first (nothing refers to them yet), then the program header
// table that maps them, by where the layout puts it. A table that grows in place goes out together
// with the ELF header in one write, so e_phnum and the entries change at once; a moved table becomes
// live with the one ELF header write that points at it; a table that grows after moving settles back
// once the dynamic tags no longer point at what it grows over (the `settle` phase).

import { EHDR, EI_NIDENT, PHDR } from '../elf/elf.js';
import type { EditFacts } from './edit-facts.js';
import type { PlannedWrite, WritePhase } from './plan.js';
import { regionBytes, type RegionPart } from './region.js';
import type { RegionLayout, TableLayout } from './segment-layout.js';
import { changedSpanWrites } from './write-list.js';

/**
 * The region holding `parts` (the blocks the edit appends), the ranges moved out of the table's way
 * and a table the layout puts in the region; then the program header writes.
 */
export function appendWrites(facts: EditFacts, layout: RegionLayout, parts: readonly RegionPart[]): PlannedWrite[] {
  const tablesInRegion = [layout.table, layout.interim].filter(
    (table): table is TableLayout => table !== null && table.tableOffset !== facts.header.e_phoff,
  );
  const bytes = regionBytes(layout.start, layout.end, [
    ...layout.moved.map((range) => ({ offset: range.to, bytes: range.bytes })),
    ...parts,
    ...tablesInRegion.map((table) => ({ offset: table.tableOffset, bytes: encodeTable(facts, table) })),
  ]);
  return [{ phase: 'data', offset: layout.start, bytes, what: 'appended tables' }, ...tableWrites(facts, layout)];
}

function encodeTable(facts: EditFacts, table: TableLayout): Uint8Array {
  return facts.codec.encodeRecords(PHDR, table.programHeaders);
}

/** The program header table, from where the layout puts it at each step to the writes that get it there. */
function tableWrites(facts: EditFacts, layout: RegionLayout): PlannedWrite[] {
  const { header } = facts;
  const { table, interim } = layout;
  if (interim !== null) {
    return [
      pointHeaderAt(facts, 'headers', interim, 'ELF header (e_phoff, e_phnum): the table, moved for now'),
      {
        phase: 'settle',
        offset: table.tableOffset,
        bytes: encodeTable(facts, table),
        what: 'the grown program header table, in its place',
      },
      pointHeaderAt(facts, 'settle', table, 'ELF header (e_phoff, e_phnum): back to the grown table'),
    ];
  }
  if (table.tableOffset !== header.e_phoff) return [pointHeaderAt(facts, 'headers', table, 'ELF header (e_phoff, e_phnum)')];
  if (table.programHeaders.length !== facts.programHeaders.length) return [grownInPlace(facts, table)];
  // Same number of entries in place: write the span that changed.
  const before = facts.codec.encodeRecords(PHDR, facts.programHeaders);
  return changedSpanWrites('headers', header.e_phoff, before, encodeTable(facts, table), 'program headers');
}

/** The ELF header's e_phoff and e_phnum, pointing at `table`. */
function pointHeaderAt(facts: EditFacts, phase: WritePhase, table: TableLayout, what: string): PlannedWrite {
  const { codec, header } = facts;
  const headerBytes = new Uint8Array(EI_NIDENT + codec.sizeOf(EHDR));
  codec.encode(EHDR, { ...header, e_phoff: table.tableOffset, e_phnum: table.programHeaders.length }, headerBytes, EI_NIDENT);
  const at = EI_NIDENT + codec.fieldOffset(EHDR, 'e_phoff');
  const end = EI_NIDENT + codec.fieldOffset(EHDR, 'e_shentsize');
  return { phase, offset: at, bytes: headerBytes.slice(at, end), what };
}

/** e_phnum and the grown table in one write, from e_phnum to the table's end (the table follows the ELF header). */
function grownInPlace(facts: EditFacts, table: TableLayout): PlannedWrite {
  const { codec, header } = facts;
  const encoded = encodeTable(facts, table);
  const headerBytes = new Uint8Array(EI_NIDENT + codec.sizeOf(EHDR));
  codec.encode(EHDR, { ...header, e_phnum: table.programHeaders.length }, headerBytes, EI_NIDENT);
  const at = EI_NIDENT + codec.fieldOffset(EHDR, 'e_phnum');
  const combined = new Uint8Array(header.e_phoff + encoded.length - at);
  combined.set(headerBytes.subarray(at), 0);
  combined.set(encoded, header.e_phoff - at);
  return { phase: 'headers', offset: at, bytes: combined, what: 'ELF header e_phnum and the grown program header table' };
}
