// Where the tables go: the string table and the dynamic array stay, or move or grow into a region
// appended to the file (its segment chosen by segment-choice.ts, laid out by segment-layout.ts), which
// also holds a new interpreter path that does not fit where the old one is.

import { DYN, PT } from '../elf/elf.js';
import type { EditFacts, InterpreterFact } from './edit-facts.js';
import type { NoPlan, PlannedWrite } from './plan.js';
import type { RegionPart } from './region.js';
import { chooseSegment } from './segment-choice.js';
import { type BlockRequest, layOutRegion, type Place, type RegionLayout } from './segment-layout.js';
import type { StringPlacement } from './string-placement.js';

/** DT_NULL slots a moved dynamic array gets beyond what it needs, so that later edits fit in place. */
const SPARE_DYNAMIC_SLOTS = 4;

export interface InterpreterChange {
  readonly old: InterpreterFact;
  /** The new path with its NUL. */
  readonly bytes: Uint8Array;
}

/** Where the string table and the dynamic array will be, and the appended region when either moves or grows. */
export interface TablePlaces {
  readonly kind: 'places';
  /** Null when both stay where they are (the in-place tier). */
  readonly region: RegionLayout | null;
  readonly table: Place;
  readonly dynamic: { readonly moves: boolean; readonly offset: number; readonly vaddr: number; readonly capacity: number };
  /** The string bytes the region holds: the whole table, moved, or the tail of one that grows where it ends the file. */
  readonly appendedStrings: readonly RegionPart[];
  /** Where a new interpreter path goes in the region; null when it goes in place (or stays). */
  readonly interpreter: Place | null;
}

/** The smallest page of any kernel: a write inside one such page is never cut by a kill (the kernel stops a write only between pages). */
const SMALLEST_PAGE = 4096;

/**
 * The write of a new interpreter path where the old one is, the old one's bytes zeroed after it; null
 * when it does not fit there (the path, its NUL and the zeros after them: `room`), or when that one
 * write would cross a page boundary, where a kill could leave half of each path.
 */
export function interpreterInPlace(change: InterpreterChange): PlannedWrite | null {
  const { old, bytes } = change;
  if (bytes.length > old.room) return null;
  const written = new Uint8Array(Math.max(bytes.length, old.text.length + 1));
  written.set(bytes);
  if (Math.floor(old.offset / SMALLEST_PAGE) !== Math.floor((old.offset + written.length - 1) / SMALLEST_PAGE)) return null;
  return { phase: 'dynamic', offset: old.offset, bytes: written, what: 'interpreter path (PT_INTERP), in place' };
}

/**
 * The facts with the old interpreter path's bytes zeroed where the program header table may grow over
 * them: the copy made of them to make room would keep the old path.
 */
function withoutOldInterpreter(facts: EditFacts, old: InterpreterFact): EditFacts {
  return {
    ...facts,
    movableRanges: facts.movableRanges.map((range) =>
      range.offset === old.offset ? { offset: range.offset, bytes: new Uint8Array(range.bytes.length) } : range,
    ),
  };
}

export function placeTables(
  facts: EditFacts,
  placement: StringPlacement,
  entryCount: number,
  interpreter: InterpreterChange | null,
): TablePlaces | NoPlan {
  const tableGrows = placement.table.length > placement.oldSize;
  const dynamicMoves = outgrowsSlots(facts, entryCount);
  const unmoved: TablePlaces = {
    kind: 'places',
    region: null,
    table: { offset: facts.dynstr.offset, vaddr: facts.dynstr.vaddr },
    dynamic: { moves: false, offset: facts.dynamic.offset, vaddr: facts.dynamic.vaddr, capacity: facts.dynamic.capacity },
    appendedStrings: [],
    interpreter: null,
  };
  // A path that fits goes in place, unless the edit appends anyway: then it joins the region, where
  // no growth of the program header table can reach it.
  const interpreterAppended = interpreter !== null && (tableGrows || dynamicMoves || interpreterInPlace(interpreter) === null);
  if (!tableGrows && !dynamicMoves && !interpreterAppended) return unmoved;
  const layoutFacts = interpreterAppended ? withoutOldInterpreter(facts, interpreter.old) : facts;
  const segment = chooseSegment(layoutFacts);
  if (segment.kind !== 'segment') return segment;
  const capacity = entryCount + 1 + SPARE_DYNAMIC_SLOTS;
  // A table that already ends the file, inside the segment being extended, grows where it is (unless the
  // dynamic array, laid out first, takes the bytes after it).
  const growsAtEnd =
    tableGrows && !dynamicMoves && segment.strategy === 'extend' && facts.dynstr.offset + placement.oldSize === facts.fileSize;
  const strings = growsAtEnd ? placement.table.subarray(placement.oldSize) : placement.table;
  // The blocks of the region, in this order: the dynamic array (ld.so writes DT_DEBUG into it), the strings.
  const { codec } = facts;
  const dynamicBlock = dynamicMoves
    ? { size: capacity * codec.sizeOf(DYN), align: codec.wordSize, mappedBy: PT.PT_DYNAMIC, writable: true }
    : null;
  const stringsBlock = tableGrows ? { size: strings.length, align: 1, writable: false } : null;
  // PT_INTERP follows the path (the kernel reads it at p_offset, glibc at p_vaddr); its entry keeps its place in the table.
  const interpreterBlock = interpreterAppended
    ? { size: interpreter.bytes.length, align: 1, mappedBy: PT.PT_INTERP, writable: false }
    : null;
  const blocks = [dynamicBlock, stringsBlock, interpreterBlock].filter((block): block is BlockRequest => block !== null);
  const region = layOutRegion(layoutFacts, segment, blocks);
  const placeOf = (block: BlockRequest | null): Place | undefined => (block === null ? undefined : region.blocks[blocks.indexOf(block)]);
  const dynamicPlace = placeOf(dynamicBlock);
  const stringsPlace = placeOf(stringsBlock);
  const interpreterPlace = placeOf(interpreterBlock);
  return {
    kind: 'places',
    region,
    table: stringsPlace === undefined || growsAtEnd ? unmoved.table : stringsPlace,
    dynamic: dynamicPlace === undefined ? unmoved.dynamic : { moves: true, ...dynamicPlace, capacity },
    appendedStrings: [
      ...(stringsPlace === undefined ? [] : [{ offset: stringsPlace.offset, bytes: strings }]),
      ...(interpreterPlace === undefined || interpreter === null ? [] : [{ offset: interpreterPlace.offset, bytes: interpreter.bytes }]),
    ],
    interpreter: interpreterPlace ?? null,
  };
}

export /** Whether `entryCount` entries and their DT_NULL need more slots than the dynamic array has. */
function outgrowsSlots(facts: EditFacts, entryCount: number): boolean {
  return entryCount + 1 > facts.dynamic.capacity;
}
