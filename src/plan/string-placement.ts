// Where each new string goes in the dynamic string table, cheapest first: a string that is already
// there, the entry's own old bytes, zeroed slack left by earlier edits, and last the end of the table
// (which makes the table move or grow). Strings nothing refers to any more are zeroed, so that no
// dead store path lingers in the file.

import { type ByteString, byteStringToBytes } from '../elf/elf.js';

/** A half-open byte range [start, end) of the table. */
export interface Range {
  readonly start: number;
  readonly end: number;
}

export interface StringRequest {
  readonly text: ByteString;
  /** The index of the string this one replaces, when it belongs to the same entry. */
  readonly previous: number | null;
}

export interface StringPlacement {
  /** Where each requested text ends up. */
  readonly indexOf: ReadonlyMap<ByteString, number>;
  /** The table as it will be: new strings put in, dead strings zeroed, appended strings at the end. */
  readonly table: Uint8Array;
  /** The size of the old table (bytes from here on are appended). */
  readonly oldSize: number;
  /** Ranges of the old table that take a new string before anything refers to it (invisible writes). */
  readonly slackWrites: readonly Range[];
  /** Ranges of the old table overwritten in place: an entry's own string, changed where it stands. */
  readonly inPlaceWrites: readonly Range[];
  /** Ranges zeroed once nothing refers to them. */
  readonly deadRanges: readonly Range[];
}

/**
 * The indices that stay referenced, as one mark per byte of the table: a file has tens of thousands
 * of symbols, and marking them once makes every question (is this index live, the first live index
 * in a range) cost only the length of the range asked about. Indices past the end of the table (a
 * damaged file) refer to no byte of it and are kept aside.
 */
class LiveIndices {
  private readonly marks: Uint8Array;
  private readonly outside = new Set<number>();

  constructor(tableSize: number, parts: readonly ArrayLike<number>[]) {
    this.marks = new Uint8Array(tableSize);
    for (const part of parts) {
      for (let i = 0; i < part.length; i++) this.add(part[i] ?? 0);
    }
  }

  add(index: number): void {
    if (index < this.marks.length) this.marks[index] = 1;
    else this.outside.add(index);
  }

  has(index: number): boolean {
    return index < this.marks.length ? this.marks[index] === 1 : this.outside.has(index);
  }

  /** The smallest index in [low, high] inside the table, or undefined. */
  firstIn(low: number, high: number): number | undefined {
    const end = Math.min(high + 1, this.marks.length);
    for (let index = Math.max(low, 0); index < end; index++) if (this.marks[index] === 1) return index;
    return undefined;
  }
}

function overlaps(a: Range, b: Range): boolean {
  return a.start < b.end && b.start < a.end;
}

/**
 * The bytes of the string at `index` that nothing live refers to: from `index` up to the first live
 * reference inside it. Empty when a live reference covers `index` itself (the string is shared as the
 * tail of, or equal to, a live string).
 */
function deadRangeOf(table: Uint8Array, live: LiveIndices, index: number): Range | null {
  const end = table.indexOf(0, index);
  if (end <= index) return null;
  const chunkStart = index === 0 ? 0 : table.lastIndexOf(0, index - 1) + 1;
  if (live.firstIn(chunkStart, index) !== undefined) return null;
  const shared = live.firstIn(index + 1, end - 1);
  return { start: index, end: shared ?? end };
}

function findOccurrence(table: Uint8Array, needle: Uint8Array, avoid: readonly Range[]): number | undefined {
  const buffer = Buffer.from(table.buffer, table.byteOffset, table.byteLength);
  for (let at = buffer.indexOf(needle); at >= 0; at = buffer.indexOf(needle, at + 1)) {
    const range = { start: at, end: at + needle.length };
    if (!avoid.some((dead) => overlaps(dead, range))) return at;
  }
  return undefined;
}

/**
 * A run of zeros that can hold `length` bytes plus a terminator: it starts right after a NUL and no
 * live reference points into it. Such runs are what earlier edits left after zeroing dead strings.
 */
function findSlack(table: Uint8Array, length: number, live: LiveIndices, taken: readonly Range[]): number | undefined {
  const buffer = Buffer.from(table.buffer, table.byteOffset, table.byteLength);
  // A terminator of what precedes, `length` bytes, and a NUL: a run of length + 2 zeros.
  const zeros = Buffer.alloc(length + 2);
  for (let at = buffer.indexOf(zeros); at >= 0; at = buffer.indexOf(zeros, at + 1)) {
    const range = { start: at + 1, end: at + 1 + length };
    // The string and its terminator must stay clear of a taken string and its terminator: two new
    // strings in one run of zeros would otherwise share a NUL and read as one.
    const withNul = { start: range.start, end: range.end + 1 };
    if (live.firstIn(range.start, range.end - 1) === undefined && !taken.some((t) => overlaps({ start: t.start, end: t.end + 1 }, withNul)))
      return range.start;
  }
  return undefined;
}

/**
 * Places `requests` in `table`. `live` are the indices that stay referenced (kept entries, symbols,
 * version records); `released` are indices whose referrers go away (candidates for zeroing).
 */
export function placeStrings(
  table: Uint8Array,
  live: readonly ArrayLike<number>[],
  released: Iterable<number>,
  requests: readonly StringRequest[],
): StringPlacement {
  const liveIndices = new LiveIndices(table.length, live);
  const indexOf = new Map<ByteString, number>();
  const pending: StringRequest[] = [];
  const releasedList = [...new Set(released)].filter((index) => !liveIndices.has(index));

  // A released string equal to a requested one is simply kept.
  for (const request of requests) {
    if (indexOf.has(request.text)) continue;
    const same = releasedList.find((index) => stringEquals(table, index, request.text));
    if (same !== undefined) {
      indexOf.set(request.text, same);
      liveIndices.add(same);
    } else pending.push(request);
  }
  const dead: Range[] = [];
  for (const index of releasedList) {
    if (liveIndices.has(index)) continue;
    const range = deadRangeOf(table, liveIndices, index);
    if (range !== null) dead.push(range);
  }

  // Strings written over the old table's bytes (in place, into slack), applied to the one copy at the end.
  const overwrites: { at: number; bytes: Uint8Array; clear: number }[] = [];
  const slackWrites: Range[] = [];
  const inPlaceWrites: Range[] = [];
  const reused: Range[] = [];
  const appended: Uint8Array[] = [];
  let appendAt = table.length;
  for (const request of pending) {
    if (indexOf.has(request.text)) continue;
    const bytes = byteStringToBytes(request.text);
    const withNul = new Uint8Array(bytes.length + 1);
    withNul.set(bytes);
    const existing = findOccurrence(table, withNul, [...dead, ...slackWrites, ...inPlaceWrites]);
    if (existing !== undefined) {
      indexOf.set(request.text, existing);
      reused.push({ start: existing, end: existing + withNul.length });
      continue;
    }
    const own = request.previous === null ? undefined : dead.find((range) => range.start === request.previous);
    // The entry's own old bytes: the new string and its NUL must fit before the range ends, or end
    // exactly on the old terminator.
    if (own !== undefined && (bytes.length < own.end - own.start || (bytes.length === own.end - own.start && table[own.end] === 0))) {
      overwrites.push({ at: own.start, bytes, clear: own.end - own.start });
      inPlaceWrites.push(own);
      dead.splice(dead.indexOf(own), 1);
      indexOf.set(request.text, own.start);
      continue;
    }
    const slack = findSlack(table, bytes.length, liveIndices, [...slackWrites, ...dead, ...reused]);
    if (slack !== undefined) {
      overwrites.push({ at: slack, bytes, clear: 0 });
      slackWrites.push({ start: slack, end: slack + bytes.length });
      indexOf.set(request.text, slack);
      continue;
    }
    indexOf.set(request.text, appendAt);
    appended.push(withNul);
    appendAt += withNul.length;
  }
  // The new table in one copy of the old one (tables reach megabytes): overwrites, dead strings, appends.
  const result = new Uint8Array(appendAt);
  result.set(table);
  for (const { at, bytes, clear } of overwrites) {
    result.fill(0, at, at + clear);
    result.set(bytes, at);
  }
  for (const range of dead) result.fill(0, range.start, range.end);
  let at = table.length;
  for (const bytes of appended) {
    result.set(bytes, at);
    at += bytes.length;
  }
  return { indexOf, table: result, oldSize: table.length, slackWrites, inPlaceWrites, deadRanges: dead };
}

function stringEquals(table: Uint8Array, index: number, text: ByteString): boolean {
  const bytes = byteStringToBytes(text);
  if (index + bytes.length >= table.length || table[index + bytes.length] !== 0) return false;
  for (let i = 0; i < bytes.length; i++) if (table[index + i] !== bytes[i]) return false;
  return true;
}
