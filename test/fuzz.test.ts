// A seeded slice of the read → plan → write fuzzer (npm run fuzz runs the long campaign): real files
// mutated in their structures, each edited through the tool's own path on a scratch file. No
// exception other than CudaPatchelfError, no input over the time cap, memory bounded, and every
// accepted input's written file reads back as the edit asked.
//
// Replay one input: npm run fuzz -- --seed <seed> --from <iteration> --iterations 1 --save-failures DIR

import { beforeAll, describe, expect, it } from 'vitest';
import { fuzzBases } from './helpers/fuzz-bases.js';
import { runFuzz, type FuzzFailure, type FuzzFigures } from './fuzz/fuzz-campaign.js';
import { MEMORY_TMP } from './helpers/temp-dir.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const SEED = Number.parseInt(process.env.FUZZ_SEED ?? '0xc1', 16) >>> 0;
/** About 20 s on a 2-core machine. */
const ITERATIONS = Number.parseInt(process.env.FUZZ_ITERATIONS ?? '6000', 10);
const TIME_CAP_MS = 2_000;
const RSS_CAP_BYTES = 1024 * 2 ** 20;

let run: { figures: FuzzFigures; failures: FuzzFailure[] };
const workDir = useTempDir('fuzz', MEMORY_TMP);

const show = (failures: readonly FuzzFailure[]): string =>
  failures
    .slice(0, 5)
    .map(
      (f) => `seed 0x${SEED.toString(16)} iteration ${f.iteration}: ${f.base}; ${f.mutation}; ${f.operation}\n  ${f.problems.join('\n  ')}`,
    )
    .join('\n');

describe(`read → plan → write on mutated real files (seed 0x${SEED.toString(16)}, ${ITERATIONS} inputs)`, () => {
  beforeAll(async () => {
    run = await runFuzz({
      seed: SEED,
      iterations: ITERATIONS,
      workDir: workDir(),
      bases: fuzzBases(),
      timeCapMs: TIME_CAP_MS,
      rssCapBytes: RSS_CAP_BYTES,
    });
    console.info(`fuzz slice: ${JSON.stringify(run.figures)}`);
  }, 300_000);

  it('exercises both refusals and writes of every kind', () => {
    const { figures } = run;
    expect(figures.iterations).toBe(ITERATIONS);
    // Mutations every planner accepts, or none accepts, would prove little.
    expect(figures.written).toBeGreaterThan(ITERATIONS / 5);
    expect(figures.refused.format ?? 0).toBeGreaterThan(ITERATIONS / 5);
    expect(figures.noop).toBeGreaterThan(0);
    expect(figures.distinctInputs).toBeGreaterThan(ITERATIONS * 0.9);
  });

  it('throws nothing but CudaPatchelfError', () => {
    expect(run.figures.crashes, show(run.failures.filter((f) => f.class === 'crash'))).toBe(0);
  });

  it(`takes less than ${TIME_CAP_MS} ms per input, in bounded memory`, () => {
    expect(run.figures.hangs, show(run.failures.filter((f) => f.class === 'hang'))).toBe(0);
    expect(run.figures.memoryOverruns).toBe(0);
    expect(run.figures.peakRssBytes).toBeLessThan(RSS_CAP_BYTES);
  });

  it('leaves refused files byte-identical, and an accepted edit reads back as asked', () => {
    const wrong = run.failures.filter((f) => f.class === 'wrong-result');
    expect(run.figures.wrongResults, `${JSON.stringify(run.figures.problemKinds, null, 2)}\n${show(wrong)}`).toBe(0);
  });
});
