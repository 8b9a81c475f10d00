// The planner: from what a file has (EditFacts) and what it should have (WantedDynamic) to an ordered
// list of positional writes, cheapest tier first. Pure: it reads nothing and writes nothing.

import { DYN, SHDR, SYM, type DynamicEntry } from '../elf/codec.js';
import { DT, PT, SHT } from '../elf/constants.js';
import type { EditFacts } from './edit-facts.js';
import { RELOCATABLE_SECTION_TAGS, STRING_TAGS } from '../elf/tag-groups.js';
import { stringAt } from '../elf/string-table.js';
import { dataViewOf } from '../elf/byte-source.js';
import type { Section } from '../elf/section-headers.js';
import { needsFacts, planned, type NoPlan, type PlanDecision, type PlannedWrite, type WritePhase } from './plan.js';
import { byteStringToBytes } from '../elf/byte-string.js';
import { chooseSegment, layOutRegion, type BlockRequest, type MovedRange, type Place, type RegionLayout } from './segment-layout.js';
import { appendWrites } from './append-writes.js';
import type { RegionPart } from './region.js';
import { changedSpanWrites, inPhaseOrder } from './write-list.js';
import { resumeOf, stringStarts, type Resume, type SectionRepair } from './resume-edit.js';
import { placeStrings, type StringPlacement, type StringRequest } from './string-placement.js';
import { CLEANUP_MARK, encodeDynamicArray, withNullValues } from './cleanup-mark.js';
import type { StringReference } from '../elf/string-references.js';
import { isStringEntry, type WantedDynamic, type WantedEntry } from './wanted.js';

/** DT_NULL slots a moved dynamic array gets beyond what it needs, so that later edits fit in place. */
const SPARE_DYNAMIC_SLOTS = 4;

interface Writes {
  add(phase: WritePhase, offset: number, bytes: Uint8Array, what: string): void;
  list(): PlannedWrite[];
}

function writeList(): Writes {
  const writes: PlannedWrite[] = [];
  return {
    add: (phase, offset, bytes, what) => writes.push({ phase, offset, bytes, what }),
    list: () => inPhaseOrder(writes),
  };
}

/** A wanted string entry whose text is what its previous index already holds is simply kept. */
function normalize(facts: EditFacts, entry: WantedEntry): WantedEntry {
  if (isStringEntry(entry) && entry.previous !== null && stringAt(facts.dynstr.bytes, entry.previous) === entry.text) {
    return { d_tag: entry.d_tag, d_val: entry.previous };
  }
  return entry;
}

/**
 * The plan for one file, cheapest tier first, or the decision that only the whole-file rewrite can
 * make this edit (the caller plans that on the shifted layout, src/plan/shift-for-rewrite.ts).
 */
export function planEdit(factsAsRead: EditFacts, wanted: WantedDynamic): PlanDecision {
  // An edit cut short is finished first; planning goes on from the section headers as they should be.
  const resume = resumeOf(factsAsRead);
  const facts = resume === null ? factsAsRead : withRepairedSections(factsAsRead, resume.sections);
  const table = facts.dynstr.bytes;
  const entries = wanted.entries.map((entry) => normalize(facts, entry));
  const renamed = facts.references.versionRecords.filter(
    (ref) => ref.source === 'version-need-file' && wanted.versionNeedRenames.has(stringAt(table, ref.index)),
  );
  if (resume === null && renamed.length === 0 && sameEntries(entries, facts.dynamic.entries))
    return planned({ tier: 'noop', writes: [], newSize: facts.fileSize });

  const symbolNames = facts.references.symbolNames;
  if (symbolNames === null && stringsMayBeFreed(facts, entries, renamed, resume)) return needsFacts('dynamic-symbols');
  const placement = placeWantedStrings(facts, symbolNames ?? new Uint32Array(0), entries, renamed, wanted, resume);
  const dynamicEntries = entries.map(
    (entry): DynamicEntry =>
      isStringEntry(entry)
        ? { d_tag: entry.d_tag, d_val: placement.indexOf.get(entry.text) ?? 0 }
        : { d_tag: entry.d_tag, d_val: entry.d_val },
  );
  const places = placeTables(facts, placement, dynamicEntries.length);
  if (places.kind !== 'places') return places;
  const { region: layout, table: newTable, dynamic } = places;
  // Section headers change address when tables move or an interrupted edit's stale ones are
  // repaired; the .symtab symbols defined in those sections follow them.
  if (facts.symbolTable !== null && facts.symbolTable.bytes === null && (layout !== null || (resume?.sections.length ?? 0) > 0))
    return needsFacts('symbol-table');
  const tableMoved = newTable.offset !== facts.dynstr.offset;
  const writes = writeList();

  const moved = layout?.moved ?? [];
  const movedRangeOf = (vaddr: number): MovedRange | undefined => moved.find((m) => vaddr >= m.fromVaddr && vaddr < m.fromVaddr + m.size);
  const finalEntries = dynamicEntries.map((entry) => {
    if (entry.d_tag === DT.DT_STRTAB) return { ...entry, d_val: newTable.vaddr };
    if (entry.d_tag === DT.DT_STRSZ) return { ...entry, d_val: placement.table.length };
    // A section moved out of the program header table's way: its tag follows the copy.
    const range = RELOCATABLE_SECTION_TAGS.includes(entry.d_tag) ? movedRangeOf(entry.d_val) : undefined;
    return range === undefined ? entry : { ...entry, d_val: entry.d_val + range.vaddrDelta };
  });

  // Strings written into the live table before or as the switch (only when the table stays put).
  if (!tableMoved) {
    for (const range of placement.slackWrites)
      writes.add(
        'data',
        facts.dynstr.offset + range.start,
        placement.table.slice(range.start, range.end),
        'new string in zeroed slack of .dynstr',
      );
    for (const range of placement.inPlaceWrites)
      writes.add(
        'dynamic',
        facts.dynstr.offset + range.start,
        placement.table.slice(range.start, range.end),
        'string rewritten in place in .dynstr',
      );
  }

  // A plan that zeroes strings marks the dynamic array until it has (cleanup-mark.ts): the array that
  // goes live at the switch is marked, and so is the one in place before it.
  const marked = placement.deadRanges.length > 0 || (resume?.deadFileRanges.length ?? 0) > 0;
  const nullValue = marked ? CLEANUP_MARK : 0;
  const dynamicSize = dynamic.capacity * facts.codec.sizeOf(DYN);
  const movedArray = dynamic.moves ? encodeDynamicArray(facts.codec, finalEntries, dynamic.capacity, nullValue) : null;
  if (layout !== null) {
    const parts = [...places.appendedStrings, ...(movedArray === null ? [] : [{ offset: dynamic.offset, bytes: movedArray }])];
    for (const write of appendWrites(facts, layout, parts)) writes.add(write.phase, write.offset, write.bytes, write.what);
  }

  const liveArray = movedArray ?? addDynamicWrites(facts, finalEntries, nullValue, writes);
  for (const ref of renamed) {
    const index = placement.indexOf.get(wanted.versionNeedRenames.get(stringAt(table, ref.index)) ?? '') ?? 0;
    // When the version needs moved out of the table's way, the rename goes to the copy.
    const range = moved.find((m) => ref.fieldOffset >= m.from && ref.fieldOffset < m.from + m.size);
    writes.add(
      'dynamic',
      ref.fieldOffset + (range === undefined ? 0 : range.to - range.from),
      encodeWord(facts, index),
      'version need file name (vn_file)',
    );
  }

  addSectionWrites(facts, writes, {
    repairs: resume?.sections ?? [],
    table: tableMoved || placement.table.length > placement.oldSize ? { ...newTable, size: placement.table.length } : null,
    dynamic: dynamic.moves ? { offset: dynamic.offset, vaddr: dynamic.vaddr, size: dynamicSize } : null,
    moved,
  });

  for (const range of placement.deadRanges) {
    writes.add('cleanup', facts.dynstr.offset + range.start, new Uint8Array(range.end - range.start), 'dead string zeroed in .dynstr');
  }
  for (const range of resume?.deadFileRanges ?? []) {
    writes.add('cleanup', range.start, new Uint8Array(range.end - range.start), 'string table an interrupted edit left, zeroed');
  }
  if (marked) {
    const cleared = withNullValues(facts.codec, liveArray, finalEntries.length, 0);
    addChangedSpan(writes, 'unmark', dynamic.offset, liveArray, cleared, 'dynamic array DT_NULL values: the cleanup is done');
  }
  return planned({ tier: layout === null ? 'in-place' : 'append', writes: writes.list(), newSize: layout?.fileEnd ?? facts.fileSize });
}

/** Whether the wanted entries are the file's entries as they are (no string to place, no value changed). */
function sameEntries(entries: readonly WantedEntry[], current: readonly DynamicEntry[]): boolean {
  return (
    entries.length === current.length &&
    entries.every((entry, i) => !isStringEntry(entry) && entry.d_tag === current[i]?.d_tag && entry.d_val === current[i]?.d_val)
  );
}

/**
 * Whether placing the strings needs to know which strings the symbols refer to: when a string may be
 * freed (released by an entry or a rename, or left dead by an interrupted edit), or when a run of zeros
 * in the table is long enough for a requested string (slack holds a string only where no symbol
 * points). Otherwise strings are only reused or appended, and the symbols do not matter.
 */
function stringsMayBeFreed(
  facts: EditFacts,
  entries: readonly WantedEntry[],
  renamed: readonly StringReference[],
  resume: Resume | null,
): boolean {
  if (resume !== null || renamed.length > 0) return true;
  const kept = new Set(entries.filter((e): e is DynamicEntry => !isStringEntry(e) && STRING_TAGS.has(e.d_tag)).map((e) => e.d_val));
  if (facts.dynamic.entries.some((e) => STRING_TAGS.has(e.d_tag) && !kept.has(e.d_val))) return true;
  const requested = entries.filter(isStringEntry).map((e) => byteStringToBytes(e.text).length);
  if (requested.length === 0) return false;
  // findSlack's shortest run: a terminator, the shortest string, its NUL.
  const table = facts.dynstr.bytes;
  return Buffer.from(table.buffer, table.byteOffset, table.byteLength).indexOf(Buffer.alloc(Math.min(...requested) + 2)) >= 0;
}

/** The new string table: what stays referenced, what is released, what must be placed. */
function placeWantedStrings(
  facts: EditFacts,
  symbolNames: Uint32Array,
  entries: readonly WantedEntry[],
  renamed: readonly StringReference[],
  wanted: WantedDynamic,
  resume: Resume | null,
): StringPlacement {
  const table = facts.dynstr.bytes;
  const live = [
    symbolNames,
    facts.references.versionRecords.filter((ref) => !renamed.includes(ref)).map((ref) => ref.index),
    entries.filter((e): e is DynamicEntry => !isStringEntry(e) && STRING_TAGS.has(e.d_tag)).map((e) => e.d_val),
  ];
  const released = [
    ...facts.dynamic.entries.filter((e) => STRING_TAGS.has(e.d_tag)).map((e) => e.d_val),
    ...renamed.map((ref) => ref.index),
    // What the cut-short cleanup would have zeroed is no longer known: every string nothing refers to.
    ...(resume === null ? [] : stringStarts(table)),
  ];
  const requests: StringRequest[] = [
    ...entries.filter(isStringEntry).map((e) => ({ text: e.text, previous: e.previous })),
    ...renamed.map((ref) => ({ text: wanted.versionNeedRenames.get(stringAt(table, ref.index)) ?? '', previous: null })),
  ];
  return placeStrings(table, live, released, requests);
}

/** Where the string table and the dynamic array will be, and the appended region when either moves or grows. */
interface TablePlaces {
  readonly kind: 'places';
  /** Null when both stay where they are (the in-place tier). */
  readonly region: RegionLayout | null;
  readonly table: Place;
  readonly dynamic: { readonly moves: boolean; readonly offset: number; readonly vaddr: number; readonly capacity: number };
  /** The string bytes the region holds: the whole table, moved, or the tail of one that grows where it ends the file. */
  readonly appendedStrings: readonly RegionPart[];
}

function placeTables(facts: EditFacts, placement: StringPlacement, entryCount: number): TablePlaces | NoPlan {
  const tableGrows = placement.table.length > placement.oldSize;
  const dynamicMoves = entryCount + 1 > facts.dynamic.capacity;
  const unmoved: TablePlaces = {
    kind: 'places',
    region: null,
    table: { offset: facts.dynstr.offset, vaddr: facts.dynstr.vaddr },
    dynamic: { moves: false, offset: facts.dynamic.offset, vaddr: facts.dynamic.vaddr, capacity: facts.dynamic.capacity },
    appendedStrings: [],
  };
  if (!tableGrows && !dynamicMoves) return unmoved;
  const segment = chooseSegment(facts);
  if (segment.kind !== 'segment') return segment;
  const capacity = entryCount + 1 + SPARE_DYNAMIC_SLOTS;
  // A table that already ends the file, inside the segment being extended, grows where it is (unless the
  // dynamic array, laid out first, takes the bytes after it).
  const growsAtEnd =
    tableGrows && !dynamicMoves && segment.strategy === 'extend' && facts.dynstr.offset + placement.oldSize === facts.fileSize;
  const strings = growsAtEnd ? placement.table.subarray(placement.oldSize) : placement.table;
  const blocks: BlockRequest[] = [
    ...(dynamicMoves
      ? [{ size: capacity * facts.codec.sizeOf(DYN), align: facts.codec.wordSize, mappedBy: PT.PT_DYNAMIC, writable: true }]
      : []),
    ...(tableGrows ? [{ size: strings.length, align: 1, writable: false }] : []),
  ];
  const region = layOutRegion(facts, segment, blocks);
  const [dynamicPlace, stringsPlace] = dynamicMoves ? region.blocks : [undefined, ...region.blocks];
  return {
    kind: 'places',
    region,
    table: stringsPlace === undefined || growsAtEnd ? unmoved.table : stringsPlace,
    dynamic: dynamicPlace === undefined ? unmoved.dynamic : { moves: true, ...dynamicPlace, capacity },
    appendedStrings: stringsPlace === undefined ? [] : [{ offset: stringsPlace.offset, bytes: strings }],
  };
}

/** The facts with the repaired section headers in place of the stale ones. */
function withRepairedSections(facts: EditFacts, repairs: readonly SectionRepair[]): EditFacts {
  const repaired = new Map(repairs.map((r) => [r.section.index, r.fields]));
  return {
    ...facts,
    sections: facts.sections.map((section) => {
      const fields = repaired.get(section.index);
      return fields === undefined ? section : { ...section, ...fields };
    }),
  };
}

function encodeWord(facts: EditFacts, value: number): Uint8Array {
  const bytes = new Uint8Array(4);
  new DataView(bytes.buffer).setUint32(0, value, facts.codec.littleEndian);
  return bytes;
}

/** One write of the span where `next` differs from `old`, the bytes at `offset`; none when they are equal. */
function addChangedSpan(writes: Writes, phase: WritePhase, offset: number, old: Uint8Array, next: Uint8Array, what: string): void {
  for (const write of changedSpanWrites(phase, offset, old, next, what)) writes.add(write.phase, write.offset, write.bytes, write.what);
}

/**
 * The dynamic array rewritten in place: one write covering its changed span, which switches everything
 * at once. A marked plan marks the array's DT_NULL slots in a write before it (`nullValue`,
 * cleanup-mark.ts). Each span is diffed against the array's bytes as the file holds them at that
 * point, not a re-encoding of what was decoded. Returns the array as the switch leaves it.
 */
function addDynamicWrites(facts: EditFacts, entries: readonly DynamicEntry[], nullValue: number, writes: Writes): Uint8Array {
  const { codec, dynamic } = facts;
  const before = nullValue === 0 ? dynamic.bytes : withNullValues(codec, dynamic.bytes, dynamic.entries.length, nullValue);
  addChangedSpan(writes, 'data', dynamic.offset, dynamic.bytes, before, 'dynamic array DT_NULL values: a cleanup is under way');
  const next = encodeDynamicArray(codec, entries, dynamic.capacity, nullValue);
  addChangedSpan(writes, 'dynamic', dynamic.offset, before, next, 'dynamic array entries');
  return next;
}

interface MovedTable {
  readonly offset: number;
  readonly vaddr: number;
  readonly size: number;
}

/** Section headers follow what moved, so that readelf, strip and debuggers see the new places. */
function addSectionWrites(
  facts: EditFacts,
  writes: Writes,
  moves: { repairs: readonly SectionRepair[]; table: MovedTable | null; dynamic: MovedTable | null; moved: readonly MovedRange[] },
): void {
  /** Address delta of each moved section, by section index. */
  const moved = new Map<number, number>();
  const update = (section: Section, fields: Partial<Section>, what: string): void => {
    const bytes = new Uint8Array(facts.codec.sizeOf(SHDR));
    facts.codec.encode(SHDR, { ...section, ...fields }, bytes, 0);
    writes.add('sections', section.headerOffset, bytes, what);
    if (fields.sh_addr !== undefined && fields.sh_addr !== section.sh_addr) moved.set(section.index, fields.sh_addr - section.sh_addr);
  };
  // Repairs first: a header this edit moves again is written once more, later in the same phase.
  for (const { section, fields } of moves.repairs) update(section, fields, `section header of ${section.name}, as the tags say`);
  for (const section of facts.sections) {
    if (
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
          `section header of ${section.name}`,
        );
      }
    }
  }
  addSymbolWrites(facts, moved, writes);
}

/** Symbols defined in a moved section (its section symbol, _DYNAMIC) follow it in .symtab. */
function addSymbolWrites(facts: EditFacts, moved: ReadonlyMap<number, number>, writes: Writes): void {
  if (facts.symbolTable === null || moved.size === 0) return;
  // planEdit asked for the bytes (NeedsFacts) whenever a section can move.
  const { offset, bytes } = facts.symbolTable;
  if (bytes === null) throw new Error('planEdit: sections moved, but the .symtab bytes were not asked for');
  const size = facts.codec.sizeOf(SYM);
  // Only st_shndx is looked at for every symbol (unstripped files have tens of thousands).
  const shndxAt = facts.codec.fieldOffset(SYM, 'st_shndx');
  const view = dataViewOf(bytes);
  for (let at = 0; at + size <= bytes.length; at += size) {
    const delta = moved.get(view.getUint16(at + shndxAt, facts.codec.littleEndian));
    if (delta === undefined) continue;
    const symbol = facts.codec.decode(SYM, bytes, at);
    const record = bytes.slice(at, at + size);
    facts.codec.encode(SYM, { st_value: symbol.st_value + delta }, record, 0);
    writes.add('sections', offset + at, record, 'symbol in a moved section (.symtab)');
  }
}
