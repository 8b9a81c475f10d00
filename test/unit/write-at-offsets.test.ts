// Executing a plan: writes of one phase that follow on in the file go out as one system call, and
// the file comes out as the writes one by one would leave it. Writes of different phases, and a
// write that lies before the one it follows, keep their own calls: their order is what keeps every
// intermediate file valid.

import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Plan, PlannedWrite, WritePhase } from '../../src/plan/plan.js';
import { writeAtOffsets, joinAdjacent } from '../../src/write/write-at-offsets.js';

const dir = mkdtempSync(join(tmpdir(), 'write-at-offsets-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const write = (phase: WritePhase, offset: number, text: string): PlannedWrite => ({
  phase,
  offset,
  bytes: Buffer.from(text, 'latin1'),
  what: `${phase} at ${offset}`,
});

const WRITES: readonly PlannedWrite[] = [
  write('data', 8, 'AB'),
  write('data', 10, 'CD'),
  write('data', 12, 'E'),
  write('headers', 13, 'F'),
  write('headers', 0, 'G'),
  write('headers', 1, 'H'),
  write('sections', 4, 'I'),
  write('sections', 3, 'J'),
  write('sections', 6, 'K'),
];

/** The file after the writes `writes`, applied one by one (what a run without joining writes leaves). */
function oneByOne(initial: string, writes: readonly PlannedWrite[]): string {
  const bytes = Buffer.from(initial, 'latin1');
  for (const w of writes) bytes.set(w.bytes, w.offset);
  return bytes.toString('latin1');
}

describe('joinAdjacent', () => {
  it.each([
    { case: 'one phase, each write where the one before ends', writes: WRITES.slice(0, 3), calls: [[8, 'ABCDE']] },
    {
      case: 'the next phase, though adjacent',
      writes: WRITES.slice(2, 4),
      calls: [
        [12, 'E'],
        [13, 'F'],
      ],
    },
    {
      case: 'a later write that ends where an earlier one starts',
      writes: WRITES.slice(6, 8),
      calls: [
        [4, 'I'],
        [3, 'J'],
      ],
    },
    {
      case: 'a gap between two writes',
      writes: [WRITES[6], WRITES[8]] as PlannedWrite[],
      calls: [
        [4, 'I'],
        [6, 'K'],
      ],
    },
    {
      case: 'the whole list',
      writes: WRITES,
      calls: [
        [8, 'ABCDE'],
        [13, 'F'],
        [0, 'GH'],
        [4, 'I'],
        [3, 'J'],
        [6, 'K'],
      ],
    },
  ])('$case', ({ writes, calls }) => {
    const joined = joinAdjacent(writes);
    expect(joined.map((w) => [w.offset, Buffer.from(w.bytes).toString('latin1')])).toEqual(calls);
    expect(oneByOne('................', joined)).toBe(oneByOne('................', writes));
  });
});

describe('writeAtOffsets', () => {
  const plan: Plan = { tier: 'append', writes: WRITES, newSize: 12 };

  it.each([0, 1, 2, 5, 8, WRITES.length])('leaves the file the first %i writes one by one leave', (limit) => {
    const path = join(dir, `limit-${limit}`);
    writeFileSync(path, '................');
    const fd = openSync(path, 'r+');
    try {
      const written = writeAtOffsets(fd, plan, { limit });
      expect(written).toBe(WRITES.slice(0, limit).reduce((sum, w) => sum + w.bytes.length, 0));
    } finally {
      closeSync(fd);
    }
    const expected = oneByOne('................', WRITES.slice(0, limit));
    // Only the whole plan cuts the file to its new size.
    expect(readFileSync(path, 'latin1')).toBe(limit === WRITES.length ? expected.slice(0, plan.newSize) : expected);
  });
});
