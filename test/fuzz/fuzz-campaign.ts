// The read → plan → write fuzzer: each iteration mutates one real file (fuzz-mutations.ts), writes it
// to a scratch file (on tmpfs where there is one) and runs one operation on it through the tool's own
// path (fuzz-operations.ts). What must hold: no exception other than CudaPatchelfError, no input over a
// fixed time cap, memory bounded, and an accepted input's written file reads back as asked.
//
// Iteration i of seed s is the same input on every machine: a failure replays with --seed s --from i
// --iterations 1.

import { createHash } from 'node:crypto';
import { copyFile, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Fixture } from '../helpers/fixtures.js';
import { inputRng, mutate } from '../helpers/fuzz-mutations.js';
import { rawLayout, type RawLayout } from '../helpers/malformed.js';
import { Watchdog } from '../helpers/watchdog.js';
import { drawOperation } from './fuzz-operations.js';

export interface FuzzConfig {
  readonly seed: number;
  readonly iterations: number;
  /** The first iteration (to replay one input, or to split a run). */
  readonly from?: number;
  /** Where the scratch file goes. */
  readonly workDir: string;
  readonly bases: readonly Fixture[];
  /** An input that takes longer than this is a hang. */
  readonly timeCapMs: number;
  /** A resident set above this is a failure. */
  readonly rssCapBytes: number;
  /** Where to keep each failing input and what the tool made of it (`<iteration>.input`, `.output`). */
  readonly saveFailuresTo?: string;
  /** Called every `progressEvery` iterations. */
  readonly onProgress?: (figures: FuzzFigures) => void;
  readonly progressEvery?: number;
  /**
   * Whether set-interpreter is drawn (one input in four, from a stream of its own): false replays an
   * input found before it was, with the operation it was found with. True unless said.
   */
  readonly interpreterEdits?: boolean;
}

/** What kind of property an input broke; an input that broke several counts once, as the first here. */
export type FailureClass = 'crash' | 'hang' | 'memory' | 'wrong-result';

export interface FuzzFailure {
  readonly class: FailureClass;
  readonly iteration: number;
  readonly base: string;
  readonly operation: string;
  readonly mutation: string;
  readonly problems: readonly string[];
}

export interface FuzzFigures {
  readonly seed: string;
  iterations: number;
  readonly baseFiles: number;
  /** Different mutated files among the iterations (by SHA-1). */
  distinctInputs: number;
  written: number;
  /** The written inputs by the tier they took. */
  writtenTiers: Record<string, number>;
  noop: number;
  skipped: number;
  refused: Record<string, number>;
  crashes: number;
  hangs: number;
  memoryOverruns: number;
  /** Accepted inputs whose written file did not read back as asked, refusals that changed the file. */
  wrongResults: number;
  maxInputMs: number;
  slowestInput: string;
  peakRssBytes: number;
  wallSeconds: number;
  /** Failing inputs by kind of problem (numbers left out), so that one bug counts as one line. */
  problemKinds: Record<string, number>;
}

/** A problem without its numbers: the same bug on different inputs gives the same kind. */
function problemKind(problem: string): string {
  return (problem.split('\n')[0] ?? '')
    .replace(/"[^"]*"/g, '"…"')
    .replace(/0x[0-9a-f]+|\d+/g, 'N')
    .slice(0, 160);
}

/** Failures kept in full (with their inputs saved): the first few of each kind. */
const EXAMPLES_PER_KIND = 5;

const HANG = 'took ';
const MEMORY = 'resident set ';

/** A crash is an exception that is not the tool's error; what is not a crash, hang or overrun is a wrong result. */
function failureClass(problems: readonly string[]): FailureClass {
  if (problems.some((p) => p.startsWith('not a CudaPatchelfError') || p.startsWith('processFile threw'))) return 'crash';
  if (problems.some((p) => p.startsWith(HANG))) return 'hang';
  if (problems.some((p) => p.startsWith(MEMORY))) return 'memory';
  return 'wrong-result';
}

const CLASS_COUNTERS = { crash: 'crashes', hang: 'hangs', memory: 'memoryOverruns', 'wrong-result': 'wrongResults' } as const;

/** The watchdog's limit: a synchronous loop never returns to the timer that would count it as a hang. */
const STUCK_MS = 60_000;
const RSS_SAMPLE_EVERY = 64;
const SAVED_OUTPUT_LIMIT = 64 * 2 ** 20;

export async function runFuzz(config: FuzzConfig): Promise<{ figures: FuzzFigures; failures: FuzzFailure[] }> {
  const bases = await Promise.all(
    config.bases.map(async (fixture) => {
      const bytes = new Uint8Array(await readFile(fixture.path));
      return { fixture, bytes, layout: rawLayout(bytes) as RawLayout };
    }),
  );
  const seedText = `0x${config.seed.toString(16)}`;
  const figures: FuzzFigures = {
    seed: seedText,
    iterations: 0,
    baseFiles: bases.length,
    distinctInputs: 0,
    written: 0,
    writtenTiers: {},
    noop: 0,
    skipped: 0,
    refused: {},
    crashes: 0,
    hangs: 0,
    memoryOverruns: 0,
    wrongResults: 0,
    maxInputMs: 0,
    slowestInput: '',
    peakRssBytes: process.memoryUsage.rss(),
    wallSeconds: 0,
    problemKinds: {},
  };
  const failures: FuzzFailure[] = [];
  // 48 bits of each input's hash: a number per input keeps the set small for a million inputs.
  const seen = new Set<number>();
  const path = join(config.workDir, 'input.so');
  const watchdog = new Watchdog(STUCK_MS);
  const started = performance.now();
  const from = config.from ?? 0;
  try {
    for (let iteration = from; iteration < from + config.iterations; iteration++) {
      const r = inputRng(config.seed, 0, iteration);
      const base = r.pick(bases);
      const { bytes, what } = mutate(base.bytes, base.layout, r);
      const operation = drawOperation(r, config.interpreterEdits === false ? null : inputRng(config.seed, 1, iteration));
      const replay = `seed ${seedText} iteration ${iteration}: ${base.fixture.id}; ${what.join('; ')}; ${operation.name}`;
      seen.add(createHash('sha1').update(bytes).digest().readUIntBE(0, 6));
      await writeFile(path, bytes);
      watchdog.pet(replay);
      const t0 = performance.now();
      const result = await operation.run(path, bytes);
      const ms = performance.now() - t0;

      figures.iterations++;
      if (result.outcome === 'refused') figures.refused[result.refusal ?? 'crash'] = (figures.refused[result.refusal ?? 'crash'] ?? 0) + 1;
      else figures[result.outcome]++;
      if (result.tier !== undefined) figures.writtenTiers[result.tier] = (figures.writtenTiers[result.tier] ?? 0) + 1;
      const problems = [...result.problems];
      if (ms > figures.maxInputMs) {
        figures.maxInputMs = ms;
        figures.slowestInput = replay;
      }
      if (ms > config.timeCapMs) problems.push(`${HANG}${ms.toFixed(0)} ms (cap ${config.timeCapMs} ms)`);
      if (iteration % RSS_SAMPLE_EVERY === 0) {
        const rss = process.memoryUsage.rss();
        figures.peakRssBytes = Math.max(figures.peakRssBytes, rss);
        if (rss > config.rssCapBytes) problems.push(`${MEMORY}${(rss / 2 ** 20).toFixed(0)} MiB over the cap`);
      }
      const failure = problems.length === 0 ? null : failureClass(problems);
      if (failure !== null) figures[CLASS_COUNTERS[failure]]++;
      const kinds = [...new Set(problems.map(problemKind))];
      for (const kind of kinds) figures.problemKinds[kind] = (figures.problemKinds[kind] ?? 0) + 1;
      if (kinds.some((kind) => (figures.problemKinds[kind] ?? 0) <= EXAMPLES_PER_KIND)) {
        failures.push({
          class: failure ?? 'wrong-result',
          iteration,
          base: base.fixture.id,
          operation: operation.name,
          mutation: what.join('; '),
          problems,
        });
        if (config.saveFailuresTo !== undefined) {
          await mkdir(config.saveFailuresTo, { recursive: true });
          await writeFile(join(config.saveFailuresTo, `${iteration}.input`), bytes);
          // A file the tool grew far past the input is a sparse hole on tmpfs; a copy would fill the disk.
          if ((await stat(path)).size <= SAVED_OUTPUT_LIMIT) await copyFile(path, join(config.saveFailuresTo, `${iteration}.output`));
        }
      }
      if (config.onProgress !== undefined && figures.iterations % (config.progressEvery ?? 10_000) === 0) {
        figures.distinctInputs = seen.size;
        figures.wallSeconds = (performance.now() - started) / 1000;
        config.onProgress(figures);
      }
    }
  } finally {
    await watchdog.stop();
  }
  figures.distinctInputs = seen.size;
  figures.wallSeconds = (performance.now() - started) / 1000;
  figures.peakRssBytes = Math.max(figures.peakRssBytes, process.memoryUsage.rss());
  return { figures, failures };
}
