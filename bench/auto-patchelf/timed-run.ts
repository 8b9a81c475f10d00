// One command on a fresh copy of a tree, measured (bench/lib/measure.ts: wall time, and the peak RSS of
// the largest process of its tree), with its output and exit code kept: both sides exit non-zero when
// a library is missing, and that is a result, not a failure of the benchmark.

import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshCopy, type Measurement, measure } from '../lib/measure.js';

export interface TimedRun {
  readonly m: Measurement;
  readonly exit: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Copies `tree` to `copy` (not timed), then runs `argv` there, measured. */
export async function timedRunOnCopy(tree: string, copy: string, argv: readonly string[], env: NodeJS.ProcessEnv): Promise<TimedRun> {
  await freshCopy(tree, copy);
  const dir = await mkdtemp(join(tmpdir(), 'cuda-patchelf-ap-'));
  const [out, err, rc] = ['stdout', 'stderr', 'rc'].map((name) => join(dir, name)) as [string, string, string];
  try {
    const m = await measure(['sh', '-c', '"$@" >"$RUN_OUT" 2>"$RUN_ERR"; echo $? >"$RUN_RC"', 'sh', ...argv], {
      ...env,
      RUN_OUT: out,
      RUN_ERR: err,
      RUN_RC: rc,
    });
    const read = (file: string): Promise<string> => readFile(file, 'utf8');
    return { m, exit: Number((await read(rc)).trim()), stdout: await read(out), stderr: await read(err) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
