// placeStrings on small hand-made tables: each way a string is placed, cheapest first, and which bytes
// are zeroed once nothing refers to them.

import { describe, expect, it } from 'vitest';
import type { ByteString } from '../../src/elf/byte-string.js';
import { placeStrings, type Range, type StringRequest } from '../../src/plan/string-placement.js';
import { type AsText, ascii } from '../helpers/byte-strings.js';

/** Strings are written here as ASCII text. */
const b = (text: string): ByteString => ascii<ByteString>(text);

/** A table from its strings: "\0" + each string and its NUL; `zeros` NULs of slack at the end. */
function tableOf(strings: readonly string[], zeros = 0): { table: Uint8Array; at: (text: string) => number } {
  const text = `\0${strings.map((s) => `${s}\0`).join('')}${'\0'.repeat(zeros)}`;
  return { table: new Uint8Array(Buffer.from(text, 'latin1')), at: (s) => text.indexOf(`\0${s}\0`) + 1 };
}

const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString('latin1');

interface Case {
  readonly name: string;
  readonly strings: readonly string[];
  readonly zeros?: number;
  /** Strings of the table, or raw indices (the tail of a string). */
  readonly live: readonly (string | number)[];
  readonly released: readonly (string | number)[];
  readonly requests: readonly (Omit<AsText<StringRequest>, 'previous'> & { previous: string | null })[];
  /** Where each request ends up: a string of the old table (its index), 'slack' at an index, or 'end'. */
  readonly placed: Readonly<Record<string, number | 'end'>>;
  readonly slackWrites?: readonly Range[];
  readonly inPlaceWrites?: readonly Range[];
  readonly deadRanges?: readonly Range[];
  readonly grows?: boolean;
}

const CASES: readonly Case[] = [
  {
    name: 'a string already in the table is reused, nothing written',
    strings: ['libc.so.6', '/old'],
    live: ['libc.so.6', '/old'],
    released: [],
    requests: [{ text: 'libc.so.6', previous: null }],
    placed: { 'libc.so.6': 1 },
  },
  {
    name: 'the tail of a live string is reused (linkers share tails)',
    strings: ['libc.so.6'],
    live: ['libc.so.6'],
    released: [],
    requests: [{ text: 'so.6', previous: null }],
    placed: { 'so.6': 6 },
  },
  {
    name: "an entry's own old bytes take a shorter string in place; the rest of them zeroed",
    strings: ['libc.so.6', '/old/path'],
    live: ['libc.so.6'],
    released: ['/old/path'],
    requests: [{ text: '/new', previous: '/old/path' }],
    placed: { '/new': 11 },
    inPlaceWrites: [{ start: 11, end: 20 }],
  },
  {
    name: 'a string of exactly the old length fits on the old terminator',
    strings: ['/old'],
    live: [],
    released: ['/old'],
    requests: [{ text: '/new', previous: '/old' }],
    placed: { '/new': 1 },
    inPlaceWrites: [{ start: 1, end: 5 }],
  },
  {
    name: 'a released string equal to a requested one is simply kept',
    strings: ['/same', '/other'],
    live: [],
    released: ['/same'],
    requests: [{ text: '/same', previous: null }],
    placed: { '/same': 1 },
  },
  {
    name: 'zeroed slack left by an earlier edit takes a new string before anything points at it',
    strings: ['a'],
    zeros: 6,
    live: ['a'],
    released: [],
    requests: [{ text: 'xy', previous: null }],
    placed: { xy: 3 },
    slackWrites: [{ start: 3, end: 5 }],
  },
  {
    name: 'a longer string goes to the end, and the old one is zeroed',
    strings: ['libc.so.6', '/old'],
    live: ['libc.so.6'],
    released: ['/old'],
    requests: [{ text: '/a/much/longer/path', previous: '/old' }],
    placed: { '/a/much/longer/path': 'end' },
    deadRanges: [{ start: 11, end: 15 }],
    grows: true,
  },
  {
    name: 'a released string whose tail is still live is zeroed only up to that tail',
    strings: ['libfoo.so.6'],
    live: [8], // 'so.6'
    released: ['libfoo.so.6'],
    requests: [],
    placed: {},
    deadRanges: [{ start: 1, end: 8 }],
  },
  {
    name: 'a released string that is the tail of a live one is left alone',
    strings: ['libc.so.6'],
    live: ['libc.so.6'],
    released: [6], // 'so.6'
    requests: [],
    placed: {},
  },
];

describe.each(CASES)('$name', (c) => {
  it('places and zeroes as expected', () => {
    const { table, at } = tableOf(c.strings, c.zeros);
    const where = (s: string | number): number => (typeof s === 'number' ? s : at(s));
    const live = c.live.map(where);
    const released = c.released.map(where);
    const requests = c.requests.map((r) => ({ text: b(r.text), previous: r.previous === null ? null : at(r.previous) }));
    const placement = placeStrings(table, [live], released, requests);

    expect(placement.oldSize).toBe(table.length);
    expect(placement.table.length > table.length).toBe(c.grows ?? false);
    for (const [request, where] of Object.entries(c.placed)) {
      const index = placement.indexOf.get(b(request));
      expect(index, request).toBe(where === 'end' ? table.length : where);
      // Whatever the way, the table as it will be holds the string at its index.
      expect(text(placement.table.subarray(index, (index ?? 0) + request.length + 1)), request).toBe(`${request}\0`);
    }
    expect(placement.slackWrites).toEqual(c.slackWrites ?? []);
    expect(placement.inPlaceWrites).toEqual(c.inPlaceWrites ?? []);
    expect(placement.deadRanges).toEqual(c.deadRanges ?? []);
    for (const range of placement.deadRanges) expect(placement.table.subarray(range.start, range.end).every((b) => b === 0)).toBe(true);
    // The live strings read as before.
    for (const index of live)
      expect(text(placement.table.subarray(index, placement.table.indexOf(0, index)))).toBe(
        text(table.subarray(index, table.indexOf(0, index))),
      );
  });
});

it('places each distinct text once, however many entries ask for it', () => {
  const { table } = tableOf(['/old']);
  const placement = placeStrings(
    table,
    [],
    [],
    [
      { text: b('/lib'), previous: null },
      { text: b('/lib'), previous: null },
    ],
  );
  expect([...placement.indexOf]).toEqual([['/lib', table.length]]);
  expect(text(placement.table.subarray(table.length))).toBe('/lib\0');
});

it('fills many slack runs over a large live set (past the scans, a sorted copy answers)', () => {
  // Runs of exactly a terminator, two bytes and a NUL after each live string: one new string each.
  const live = Array.from({ length: 40 }, (_, i) => `L${i}`);
  const bytes = Buffer.from(`\0${live.map((s) => `${s}\0\0\0\0`).join('')}`, 'latin1');
  const table = new Uint8Array(bytes);
  const liveAt = live.map((s) => bytes.indexOf(`\0${s}\0`) + 1);
  const requests = Array.from({ length: 20 }, (_, i) => ({ text: b(`q${String.fromCharCode(97 + i)}`), previous: null }));
  const placement = placeStrings(table, [liveAt], [], requests);
  expect(placement.table.length).toBe(table.length);
  expect(placement.slackWrites).toHaveLength(requests.length);
  for (const { text: request } of requests) {
    const index = placement.indexOf.get(b(request)) ?? -1;
    expect(text(placement.table.subarray(index, index + request.length + 1)), request).toBe(`${request}\0`);
  }
  for (const [i, s] of live.entries()) expect(text(placement.table.subarray(liveAt[i], (liveAt[i] ?? 0) + s.length + 1))).toBe(`${s}\0`);
});

// Two new strings placed in one long run of slack once got adjacent ranges, the second on the first
// one's terminator, so the first read as both joined ("xyzw") and the read-back refused the edit.
it('keeps a NUL between two new strings placed in the same slack run', () => {
  const { table } = tableOf(['a'], 12);
  const placement = placeStrings(
    table,
    [[1]],
    [],
    [
      { text: b('xy'), previous: null },
      { text: b('zw'), previous: null },
    ],
  );
  for (const request of ['xy', 'zw']) {
    const index = placement.indexOf.get(b(request)) ?? -1;
    expect(text(placement.table.subarray(index, index + request.length + 1)), request).toBe(`${request}\0`);
  }
});
