// Seeded random mutation of real files: whatever the bytes, the reader either reads the file or throws a
// CudaPatchelfError that says where — never another exception, never a long stall.
//
// Replay: FUZZ_SEED=<hex seed> npx vitest run test/reader-mutation.test.ts (the seed is in every failure);
// FUZZ_MUTATIONS=<n per file> for a longer run.

import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { readElfImage } from '../src/elf/elf-image.js';
import { readSectionHeaders } from '../src/elf/section-headers.js';
import { summarize } from '../src/edit/summary.js';
import { CudaPatchelfError } from '../src/errors/cuda-patchelf-error.js';
import type { Fixture } from './helpers/fixtures.js';
import { mutationTargets } from './helpers/fuzz-bases.js';
import { inputRng, mutate } from './helpers/fuzz-mutations.js';
import { rawLayout } from './helpers/malformed.js';
import { MemoryByteSource } from './helpers/memory-byte-source.js';
import { Watchdog } from './helpers/watchdog.js';

const SEED = Number.parseInt(process.env.FUZZ_SEED ?? '0x5eed1e5', 16) >>> 0;
/** FUZZ_MUTATIONS raises the count for a longer hunt; the default keeps the run to a few seconds. */
const MUTATIONS_PER_FILE = Number.parseInt(process.env.FUZZ_MUTATIONS ?? '2000', 10);
const MIN_MUTATIONS = 10_000;
/**
 * One read takes well under a millisecond; single reads of a few hundred ms happen when the collector
 * runs. A loop driven by a bad count or offset would run far past this bound.
 */
const PER_CALL_MS = 5_000;

interface Failure {
  fixture: string;
  iteration: number;
  mutation: string;
  problem: string;
}

async function readAll(bytes: Uint8Array): Promise<void> {
  const image = await readElfImage(new MemoryByteSource(bytes));
  await summarize(image);
  await readSectionHeaders(image);
}

interface Base {
  readonly fixture: Fixture;
  readonly bytes: Uint8Array;
}

interface Run {
  readonly failures: Failure[];
  readonly total: number;
  readonly refused: number;
  readonly slowest: number;
}

async function mutateAll(bases: readonly Base[], watchdog: Watchdog): Promise<Run> {
  const failures: Failure[] = [];
  let total = 0;
  let refused = 0;
  let slowest = 0;
  for (const [fileIndex, { fixture, bytes: base }] of bases.entries()) {
    // Every base must read cleanly, or the mutations would test nothing but the first error.
    await readAll(base);
    const layout = rawLayout(base);
    for (let iteration = 0; iteration < MUTATIONS_PER_FILE; iteration++) {
      const r = inputRng(SEED, fileIndex, iteration);
      const { bytes, what } = mutate(base, layout, r);
      watchdog.pet(`FUZZ_SEED=${SEED.toString(16)} ${fixture.id} iteration ${iteration}: ${what.join('; ')}`);
      const started = performance.now();
      let problem: string | null = null;
      try {
        await readAll(bytes);
      } catch (error) {
        refused++;
        if (!(error instanceof CudaPatchelfError)) {
          problem = `${error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ''}` : String(error)}`;
        } else if (error.kind !== 'format') {
          problem = `kind ${error.kind}: ${error.message}`;
        } else if (/NaN|undefined|Infinity/.test(error.describe())) {
          problem = `unreadable message: ${error.describe()}`;
        } else if (error.offset !== undefined && !(Number.isInteger(error.offset) && error.offset >= 0)) {
          problem = `offset ${error.offset} is not a file offset: ${error.describe()}`;
        }
      }
      const ms = performance.now() - started;
      slowest = Math.max(slowest, ms);
      if (ms > PER_CALL_MS) problem = `${problem ?? ''} took ${ms.toFixed(0)} ms`;
      if (problem !== null) failures.push({ fixture: fixture.id, iteration, mutation: what.join('; '), problem });
      total++;
    }
  }
  return { failures, total, refused, slowest };
}

describe(`seeded mutation (FUZZ_SEED=${SEED.toString(16)})`, () => {
  it('only CudaPatchelfError escapes the reader, and every read is quick', async () => {
    const bases = await Promise.all(mutationTargets().map(async (f) => ({ fixture: f, bytes: new Uint8Array(await readFile(f.path)) })));
    const kinds = new Set(bases.map(({ bytes }) => `${bytes[4]}/${bytes[5]}`));
    // ELF64 LE, ELF32 LE and ELF64 BE at least.
    expect(kinds.size, [...kinds].join(' ')).toBeGreaterThanOrEqual(3);

    // A reader stuck in a synchronous loop never yields to the test's own timeout.
    const watchdog = new Watchdog(PER_CALL_MS * 2);
    let run: Run;
    try {
      run = await mutateAll(bases, watchdog);
    } finally {
      await watchdog.stop();
    }
    const { failures, total, refused, slowest } = run;
    console.info(
      `FUZZ_SEED=${SEED.toString(16)}: ${total} mutations of ${bases.length} files, ${refused} refused, slowest read ${slowest.toFixed(1)} ms`,
    );
    expect(failures.slice(0, 5), `FUZZ_SEED=${SEED.toString(16)}: ${failures.length} failures`).toEqual([]);
    expect(total).toBeGreaterThanOrEqual(MIN_MUTATIONS);
    // Mutations that every reader would accept prove nothing; most must hit something the reader checks.
    expect(refused).toBeGreaterThan(total / 4);
    expect(refused).toBeLessThan(total);
    expect(slowest).toBeLessThan(PER_CALL_MS);
  });
});
