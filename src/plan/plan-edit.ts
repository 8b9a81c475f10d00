// The planner: from what a file has (EditFacts) and what it should have (WantedDynamic) to an ordered
// list of positional writes, cheapest tier first. Pure: it reads nothing and writes nothing.
//
// In three steps. What the edit changes (WantedChange), with an edit cut short finished first. Where
// each new byte goes: strings into the string table (string-placement.ts), an interpreter path where
// the old one is when it fits, and when a table must move or grow, or the path does not fit, the
// blocks the appended region holds (table-places.ts). Then the writes, each part's own (editPlan),
// put in phase order (write-list.ts): every prefix of them leaves a file that loads. Where a step
// needs a fact read only on request, or no tier fits, it returns that instead of a plan.

import {
  asciiByteString,
  type ByteString,
  byteStringToBytes,
  concatByteStrings,
  DT,
  DYN,
  type DynamicEntry,
  RELOCATABLE_SECTION_TAGS,
  STRING_TAGS,
  stringAt,
  type StringReference,
} from '../elf/elf.js';
import { appendWrites } from './append-writes.js';
import { CLEANUP_MARK, encodeDynamicArray, withNullValues } from './cleanup-mark.js';
import type { EditFacts, InterpreterFact } from './edit-facts.js';
import { needsFacts, planned, type Plan, type PlanDecision, type PlannedWrite } from './plan.js';
import { resumeOf, stringStarts, type Resume, type SectionRepair } from './resume-edit.js';
import { sectionWrites } from './section-writes.js';
import { chooseSegment } from './segment-choice.js';
import type { MovedRange, Place, RegionLayout } from './segment-layout.js';
import { type InterpreterChange, interpreterInPlace, outgrowsSlots, placeTables, type TablePlaces } from './table-places.js';
import { placeStrings, type StringPlacement, type StringRequest } from './string-placement.js';
import { isStringEntry, type WantedDynamic, type WantedEntry } from './wanted.js';
import { changedSpanWrites, inPhaseOrder } from './write-list.js';

/** What the edit changes, as the planner works on it. */
interface WantedChange {
  /** The dynamic array as it should be; an entry whose string its old index already holds is kept as it is. */
  readonly entries: readonly WantedEntry[];
  /** The version need file names (vn_file) that follow a DT_NEEDED rename: each record and its new name. */
  readonly renames: readonly VersionNeedRename[];
  /** A new interpreter path; null when it stays as it is. */
  readonly interpreter: InterpreterChange | null;
}

interface VersionNeedRename {
  readonly ref: StringReference;
  readonly text: ByteString;
}

const NUL = asciiByteString('\0');

/**
 * The plan for one file, cheapest tier first, or the decision that only the whole-file rewrite can
 * make this edit (the caller plans that on the shifted layout, src/plan/shift-for-rewrite.ts), that a
 * fact read on request is needed first, or that no tier can.
 */
export function planEdit(factsAsRead: EditFacts, wanted: WantedDynamic): PlanDecision {
  // An edit cut short is finished first; planning goes on from the section headers as they should be.
  const resume = resumeOf(factsAsRead);
  const facts = resume === null ? factsAsRead : withRepairedSections(factsAsRead, resume.sections);
  const change = wantedChange(facts, wanted);
  if (resume === null && change.renames.length === 0 && change.interpreter === null && sameEntries(change.entries, facts.dynamic.entries))
    return planned({ tier: 'noop', writes: [], newSize: facts.fileSize });

  const symbolNames = facts.references.symbolNames;
  if (symbolNames === null && stringsMayBeFreed(facts, change, resume)) return needsFacts('dynamic-symbols');
  // The segment that maps the appended region may need the .dynsym facts too (chooseSegment): when the
  // tables certainly move, they are asked for before the strings are placed, which the next pass,
  // with them, would place again.
  if (symbolNames === null && resume === null && change.interpreter === null && tablesMove(facts, change)) {
    const segment = chooseSegment(facts);
    if (segment.kind === 'needs-facts') return segment;
  }
  const placement = placeWantedStrings(facts, symbolNames ?? new Uint32Array(0), change, resume);
  const entries = change.entries.map(
    (entry): DynamicEntry =>
      isStringEntry(entry)
        ? { d_tag: entry.d_tag, d_val: placement.indexOf.get(entry.text) ?? 0 }
        : { d_tag: entry.d_tag, d_val: entry.d_val },
  );
  const places = placeTables(facts, placement, entries.length, change.interpreter);
  if (places.kind !== 'places') return places;
  // Section headers change address when tables move or an interrupted edit's stale ones are
  // repaired; the .symtab symbols defined in those sections follow them.
  const sectionsMove = places.region !== null || (resume?.sections.length ?? 0) > 0;
  if (sectionsMove && facts.symbolTable !== null && facts.symbolTable.bytes === null) return needsFacts('symbol-table');
  return planned(editPlan(facts, { resume, change, placement, entries, places }));
}

/** The wanted entries, an entry whose string is already at its old index kept as it is; the version needs a rename reaches. */
function wantedChange(facts: EditFacts, wanted: WantedDynamic): WantedChange {
  const table = facts.dynstr.bytes;
  const renames: VersionNeedRename[] = [];
  for (const ref of facts.references.versionRecords) {
    const text = ref.source === 'version-need-file' ? wanted.versionNeedRenames.get(stringAt(table, ref.index)) : undefined;
    if (text !== undefined) renames.push({ ref, text });
  }
  const entries = wanted.entries.map((entry): WantedEntry => {
    if (isStringEntry(entry) && entry.previous !== null && stringAt(table, entry.previous) === entry.text) {
      return { d_tag: entry.d_tag, d_val: entry.previous };
    }
    return entry;
  });
  const old = facts.interpreter;
  const interpreter =
    old === null || wanted.interpreter === null || wanted.interpreter === old.text
      ? null
      : { old, bytes: byteStringToBytes(concatByteStrings(wanted.interpreter, NUL)) };
  return { entries, renames, interpreter };
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
function stringsMayBeFreed(facts: EditFacts, change: WantedChange, resume: Resume | null): boolean {
  if (resume?.unreferencedStrings === true || change.renames.length > 0) return true;
  const { entries } = change;
  const kept = new Set(entries.filter((e): e is DynamicEntry => !isStringEntry(e) && STRING_TAGS.has(e.d_tag)).map((e) => e.d_val));
  if (facts.dynamic.entries.some((e) => STRING_TAGS.has(e.d_tag) && !kept.has(e.d_val))) return true;
  const requested = entries.filter(isStringEntry).map((e) => byteStringToBytes(e.text).length);
  if (requested.length === 0) return false;
  // findSlack's shortest run: a terminator, the shortest string, its NUL.
  const table = facts.dynstr.bytes;
  return Buffer.from(table.buffer, table.byteOffset, table.byteLength).indexOf(Buffer.alloc(Math.min(...requested) + 2)) >= 0;
}

/**
 * Whether the dynamic array and the string table cannot stay as they are, told before the strings are
 * placed, for an edit that frees no string (stringsMayBeFreed is false): the array outgrows its slots,
 * or a wanted string occurs nowhere in the table. placeStrings then appends it: no string is dead and
 * no run of zeros can hold it. Exactly when placeTables would lay out a region.
 */
function tablesMove(facts: EditFacts, change: WantedChange): boolean {
  if (outgrowsSlots(facts, change.entries.length)) return true;
  const table = facts.dynstr.bytes;
  const buffer = Buffer.from(table.buffer, table.byteOffset, table.byteLength);
  return change.entries.some((entry) => isStringEntry(entry) && buffer.indexOf(byteStringToBytes(concatByteStrings(entry.text, NUL))) < 0);
}

/** The new string table: what stays referenced, what is released, what must be placed. */
function placeWantedStrings(facts: EditFacts, symbolNames: Uint32Array, change: WantedChange, resume: Resume | null): StringPlacement {
  const table = facts.dynstr.bytes;
  const { entries, renames } = change;
  const renamed = new Set(renames.map((rename) => rename.ref));
  const live = [
    symbolNames,
    facts.references.versionRecords.filter((ref) => !renamed.has(ref)).map((ref) => ref.index),
    entries.filter((e): e is DynamicEntry => !isStringEntry(e) && STRING_TAGS.has(e.d_tag)).map((e) => e.d_val),
  ];
  const released = [
    ...facts.dynamic.entries.filter((e) => STRING_TAGS.has(e.d_tag)).map((e) => e.d_val),
    ...renames.map((rename) => rename.ref.index),
    // What the cut-short cleanup would have zeroed is no longer known: every string nothing refers to.
    ...(resume?.unreferencedStrings === true ? stringStarts(table) : []),
  ];
  const requests: StringRequest[] = [
    ...entries.filter(isStringEntry).map((e) => ({ text: e.text, previous: e.previous })),
    ...renames.map((rename) => ({ text: rename.text, previous: null })),
  ];
  return placeStrings(table, live, released, requests);
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

/** Everything a plan is made from, once every fact it needs is at hand and its tier fits. */
interface EditParts {
  readonly resume: Resume | null;
  readonly change: WantedChange;
  readonly placement: StringPlacement;
  /** The wanted entries with their strings placed. */
  readonly entries: readonly DynamicEntry[];
  readonly places: TablePlaces;
}

/**
 * The writes of each part, put in phase order: strings put into the table where it stands, the
 * appended region and the program headers that map it, the dynamic array (the switch), the version
 * need renames, the section headers, the dead strings zeroed, and the cleanup mark cleared.
 */
function editPlan(facts: EditFacts, parts: EditParts): Plan {
  const { resume, change, placement, places } = parts;
  const { region, table, dynamic } = places;
  const moved = region?.moved ?? [];
  const entries = switchedEntries(parts.entries, placement, table, moved);
  // A plan that zeroes strings marks the dynamic array until it has (cleanup-mark.ts): the array that
  // goes live at the switch is marked, and so is the one in place before it.
  const marked = placement.deadRanges.length > 0 || (resume?.deadFileRanges.length ?? 0) > 0;
  const liveArray = encodeDynamicArray(facts.codec, entries, dynamic.capacity, marked ? CLEANUP_MARK : 0);
  const tableMoved = table.offset !== facts.dynstr.offset;
  const dynamicSize = dynamic.capacity * facts.codec.sizeOf(DYN);
  const interpreter = change.interpreter;
  const interpreterMoved = interpreter !== null && places.interpreter !== null ? places.interpreter : null;
  const writes: PlannedWrite[] = [
    // Strings written into the live table before or as the switch (only when the table stays put).
    ...(tableMoved ? [] : stringsInPlace(facts, placement)),
    // A path in place is one write, which switches it; a moved one switches with the program headers.
    ...(interpreter === null || interpreterMoved !== null ? [] : [interpreterInPlace(interpreter)].filter((w) => w !== null)),
    ...(region === null
      ? []
      : appendWrites(facts, region, [...places.appendedStrings, ...(dynamic.moves ? [{ offset: dynamic.offset, bytes: liveArray }] : [])])),
    ...(dynamic.moves ? [] : dynamicArrayWrites(facts, liveArray, marked)),
    ...versionNeedWrites(facts, change.renames, placement, moved),
    ...sectionWrites(facts, {
      repairs: resume?.sections ?? [],
      table: tableMoved || placement.table.length > placement.oldSize ? { ...table, size: placement.table.length } : null,
      dynamic: dynamic.moves ? { offset: dynamic.offset, vaddr: dynamic.vaddr, size: dynamicSize } : null,
      interpreter: interpreterMoved === null || interpreter === null ? null : { ...interpreterMoved, size: interpreter.bytes.length },
      moved,
    }),
    ...cleanupWrites(facts, placement, resume),
    ...(interpreterMoved === null || interpreter === null || region === null ? [] : oldInterpreterZeroed(facts, interpreter.old, region)),
    ...(marked
      ? changedSpanWrites(
          'unmark',
          dynamic.offset,
          liveArray,
          withNullValues(facts.codec, liveArray, entries.length, 0),
          'dynamic array DT_NULL values: the cleanup is done',
        )
      : []),
  ];
  return { tier: region === null ? 'in-place' : 'append', writes: inPhaseOrder(writes), newSize: region?.fileEnd ?? facts.fileSize };
}

/** The entries as the switch writes them: DT_STRTAB and DT_STRSZ name the new table, and a tag whose section moved follows it. */
function switchedEntries(
  entries: readonly DynamicEntry[],
  placement: StringPlacement,
  table: Place,
  moved: readonly MovedRange[],
): DynamicEntry[] {
  return entries.map((entry) => {
    if (entry.d_tag === DT.DT_STRTAB) return { ...entry, d_val: table.vaddr };
    if (entry.d_tag === DT.DT_STRSZ) return { ...entry, d_val: placement.table.length };
    // A section moved out of the program header table's way: its tag follows the copy.
    const range = RELOCATABLE_SECTION_TAGS.includes(entry.d_tag)
      ? moved.find((m) => entry.d_val >= m.fromVaddr && entry.d_val < m.fromVaddr + m.size)
      : undefined;
    return range === undefined ? entry : { ...entry, d_val: entry.d_val + range.vaddrDelta };
  });
}

/** New strings put into zeroed slack before anything refers to them, and strings rewritten where they stand, as the switch. */
function stringsInPlace(facts: EditFacts, placement: StringPlacement): PlannedWrite[] {
  const at = (range: { start: number; end: number }): { offset: number; bytes: Uint8Array } => ({
    offset: facts.dynstr.offset + range.start,
    bytes: placement.table.slice(range.start, range.end),
  });
  return [
    ...placement.slackWrites.map((range): PlannedWrite => ({ phase: 'data', ...at(range), what: 'new string in zeroed slack of .dynstr' })),
    ...placement.inPlaceWrites.map(
      (range): PlannedWrite => ({ phase: 'dynamic', ...at(range), what: 'string rewritten in place in .dynstr' }),
    ),
  ];
}

/**
 * The dynamic array rewritten in place: one write covering its changed span, which switches everything
 * at once. A marked plan marks the array's DT_NULL slots in a write before it (cleanup-mark.ts). Each
 * span is diffed against the array's bytes as the file holds them at that point, not a re-encoding of
 * what was decoded.
 */
function dynamicArrayWrites(facts: EditFacts, liveArray: Uint8Array, marked: boolean): PlannedWrite[] {
  const { codec, dynamic } = facts;
  const before = marked ? withNullValues(codec, dynamic.bytes, dynamic.entries.length, CLEANUP_MARK) : dynamic.bytes;
  return [
    ...changedSpanWrites('data', dynamic.offset, dynamic.bytes, before, 'dynamic array DT_NULL values: a cleanup is under way'),
    ...changedSpanWrites('dynamic', dynamic.offset, before, liveArray, 'dynamic array entries'),
  ];
}

/** Each renamed version need's vn_file, pointing at its new name; in the copy when the version needs moved out of the table's way. */
function versionNeedWrites(
  facts: EditFacts,
  renames: readonly VersionNeedRename[],
  placement: StringPlacement,
  moved: readonly MovedRange[],
): PlannedWrite[] {
  return renames.map(({ ref, text }): PlannedWrite => {
    const range = moved.find((m) => ref.fieldOffset >= m.from && ref.fieldOffset < m.from + m.size);
    return {
      phase: 'dynamic',
      offset: ref.fieldOffset + (range === undefined ? 0 : range.to - range.from),
      bytes: encodeWord(facts, placement.indexOf.get(text) ?? 0),
      what: 'version need file name (vn_file)',
    };
  });
}

/** The strings nothing refers to any more, zeroed, and a table an interrupted edit left. */
function cleanupWrites(facts: EditFacts, placement: StringPlacement, resume: Resume | null): PlannedWrite[] {
  const zeros = (size: number): Uint8Array => new Uint8Array(size);
  return [
    ...placement.deadRanges.map(
      (range): PlannedWrite => ({
        phase: 'cleanup',
        offset: facts.dynstr.offset + range.start,
        bytes: zeros(range.end - range.start),
        what: 'dead string zeroed in .dynstr',
      }),
    ),
    ...(resume?.deadFileRanges ?? []).map(
      (range): PlannedWrite => ({
        phase: 'cleanup',
        offset: range.start,
        bytes: zeros(range.end - range.start),
        what: 'string table an interrupted edit left, zeroed',
      }),
    ),
  ];
}

/**
 * The old interpreter path, zeroed once PT_INTERP has left it (a replaced /nix/store path would keep
 * that dependency alive), except where the program header table now lies: it may have grown over it.
 */
function oldInterpreterZeroed(facts: EditFacts, old: InterpreterFact, region: RegionLayout): PlannedWrite[] {
  const { header } = facts;
  const tableEnd = header.e_phoff + region.table.programHeaders.length * header.e_phentsize;
  const inPlaceTable = region.table.tableOffset === header.e_phoff;
  let start = old.offset;
  let end = old.offset + old.text.length + 1;
  if (inPlaceTable && start >= header.e_phoff && start < tableEnd) start = tableEnd;
  if (inPlaceTable && header.e_phoff > start && header.e_phoff < end) end = header.e_phoff;
  if (start >= end) return [];
  return [{ phase: 'cleanup', offset: start, bytes: new Uint8Array(end - start), what: 'old interpreter path zeroed' }];
}

function encodeWord(facts: EditFacts, value: number): Uint8Array {
  const bytes = new Uint8Array(4);
  new DataView(bytes.buffer).setUint32(0, value, facts.codec.littleEndian);
  return bytes;
}
