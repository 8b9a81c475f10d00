// The batch across worker threads, in the unit tier: the threads run a fake worker
// (helpers/fake-worker.ts) in place of the bundled one, which only a build makes.
// - The pool (src/batch/worker-pool.ts): outcomes coming back, a failed file's error rebuilt, and
//   threads that die: the file in hand fails, the others go to a replacement, and past the
//   replacements the files left fail with a clear error instead of waiting forever.
// - The scheduler (schedule-files.ts): the thread limit, files told apart in this thread (not ELF, a
//   later name of a hard link), ELF files sent to threads that start one per file waiting, those
//   patched here when no thread has loaded by the end of the walk, and the files in flight capped. An
//   outcome with the runpath "worker" came from a thread, a real one from this thread.

import { describe, expect, it } from 'vitest';
import type { FileOutcome } from '../../src/batch/file-outcome.js';
import type { FileItem, FileOptions } from '../../src/batch/process-file.js';
import { FileScheduler, type TakenFile } from '../../src/batch/schedule-files.js';
import { WorkerPool } from '../../src/batch/worker-pool.js';
import { CudaPatchelfError } from '../../src/errors/cuda-patchelf-error.js';
import { driverHook } from '../../src/hook-engine/builtin-hooks.js';
import { walkTrees } from '../../src/walk/walk-trees.js';
import { useTempDir } from '../helpers/use-temp-dir.js';
import { corpus, textFile, type TreeEntry, treeIn, truncatedElf } from './helpers/corpus-tree.js';
import { FAKE_EXIT_CODE, type FakeWorkerMode, fakeWorkerScript, HOLD_CHANNEL } from './helpers/fake-worker.js';

const scratch = useTempDir('unit-batch-threads');

const APPLY: FileOptions = { hooks: [], semantics: 'default', dryRun: false };

const item = (name: string): FileItem => ({ kind: 'file', path: `/tree/${name}`, relativePath: name });

/** Runs `names` through a pool of `threads` fake workers, all given in one turn of the event loop. */
async function runPool(
  names: readonly string[],
  threads: number,
  options: FileOptions = APPLY,
): Promise<{ outcomes: FileOutcome[]; started: number }> {
  const pool = new WorkerPool(options, threads, await fakeWorkerScript(scratch(), 'answer'));
  pool.growTo(threads);
  try {
    const outcomes = await Promise.all(names.map((name) => pool.run(item(name))));
    return { outcomes, started: pool.started };
  } finally {
    await pool.close();
  }
}

/** A failed outcome's error, which must be one. */
function errorOf(outcome: FileOutcome | undefined): CudaPatchelfError {
  if (outcome?.status !== 'failed') throw new Error(`not a failure: ${JSON.stringify(outcome)}`);
  return outcome.error;
}

const WROTE_MAYBE = 'the file is unchanged, part-way or fully patched (every write leaves it valid): run apply again to finish it';

describe('WorkerPool', () => {
  it('starts threads only when grown, never more than its limit, and is ready once one has loaded', async () => {
    const pool = new WorkerPool(APPLY, 2, await fakeWorkerScript(scratch(), 'answer'));
    try {
      expect(pool.started).toBe(0);
      pool.growTo(1);
      pool.growTo(5);
      expect(pool.started).toBe(2);
      // A thread's ready message comes before its first answer.
      expect(await pool.run(item('a.so'))).toEqual({ path: '/tree/a.so', status: 'unchanged', runpath: 'worker' });
      expect(pool.ready).toBe(true);
    } finally {
      await pool.close();
    }
  });

  it("brings each file's outcome back, a failure as a CudaPatchelfError with its kind, file and offset", async () => {
    const { outcomes, started } = await runPool(['a.so', 'fail.so', 'b.so'], 2);
    expect(started).toBe(2);
    expect(outcomes[0]).toEqual({ path: '/tree/a.so', status: 'unchanged', runpath: 'worker' });
    expect(outcomes[2]).toEqual({ path: '/tree/b.so', status: 'unchanged', runpath: 'worker' });
    const error = errorOf(outcomes[1]);
    expect(error).toBeInstanceOf(CudaPatchelfError);
    expect([error.kind, error.file, error.offset, error.describe()]).toEqual([
      'format',
      '/tree/fail.so',
      16,
      '/tree/fail.so: bad bytes (at offset 0x10)',
    ]);
  });

  it('fails only the file a dead thread had in hand; the files it held go to its replacement', async () => {
    const { outcomes, started } = await runPool(['a.so', 'exit.so', 'c.so', 'd.so'], 1);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['unchanged', 'failed', 'unchanged', 'unchanged']);
    const error = errorOf(outcomes[1]);
    expect([error.kind, error.file]).toEqual(['stopped', '/tree/exit.so']);
    expect(error.message).toBe(`the worker thread patching this file died (exit code ${FAKE_EXIT_CODE}); ${WROTE_MAYBE}`);
    expect(started).toBe(2);
  });

  it('says how a thread died of an uncaught exception, and that a dry run wrote nothing', async () => {
    const { outcomes } = await runPool(['throw.so', 'b.so'], 1, { ...APPLY, dryRun: true });
    expect(errorOf(outcomes[0]).message).toBe(
      'the worker thread patching this file died (exit code 1: Error: thrown in the worker); nothing was written',
    );
    expect(outcomes[1]).toEqual({ path: '/tree/b.so', status: 'unchanged', runpath: 'worker' });
  });

  it('replaces three dead threads in a run; past them, the files left fail, saying how many threads died', async () => {
    const { outcomes, started } = await runPool(['exit-1.so', 'exit-2.so', 'exit-3.so', 'exit-4.so', 'e.so'], 1);
    expect(started).toBe(4);
    for (const outcome of outcomes.slice(0, 4))
      expect(errorOf(outcome).message.startsWith(`the worker thread patching this file died (exit code ${FAKE_EXIT_CODE});`)).toBe(true);
    const left = errorOf(outcomes[4]);
    expect([left.kind, left.message]).toEqual(['stopped', 'no worker thread is left to patch this file (4 died in this run); left alone']);
  });
});

const DRY_RUN: FileOptions = { hooks: [driverHook()], semantics: 'default', dryRun: true };

/** `count` copies of a corpus library, lib-00.so …, and a text file. */
function libraries(count: number): Record<string, TreeEntry> {
  const entries: Record<string, TreeEntry> = { README: textFile('text\n') };
  for (let i = 0; i < count; i++) entries[`lib-${String(i).padStart(2, '0')}.so`] = corpus('x86_64-lib-lld.so');
  return entries;
}

function fileItems(tree: string): FileItem[] {
  return [...walkTrees([tree])].filter((item): item is FileItem => item.kind === 'file');
}

async function scheduler(mode: FakeWorkerMode, jobs: number, cpuCount: number, threadsFromStart: boolean): Promise<FileScheduler> {
  return new FileScheduler(DRY_RUN, jobs, cpuCount, threadsFromStart, await fakeWorkerScript(scratch(), mode));
}

const outcomeOf = (taken: TakenFile): Promise<FileOutcome> => ('later' in taken ? taken.later : Promise.resolve(taken.outcome));

/** What an outcome says of where it was made: "worker", "held", "after" from a thread, or its status here. */
const where = (outcome: FileOutcome): string =>
  outcome.status === 'unchanged' && outcome.runpath !== null ? outcome.runpath : `${outcome.status} here`;

describe('FileScheduler', () => {
  it('runs at most --jobs threads, never more than the CPUs, and at least one', async () => {
    const limits: number[] = [];
    for (const [jobs, cpuCount] of [
      [8, 3],
      [2, 16],
      [1, 16],
      [0, 4],
    ] as const) {
      const files = await scheduler('never-ready', jobs, cpuCount, false);
      limits.push(files.maxThreads);
      expect(files.workerThreads).toBe(0);
      await files.close();
    }
    expect(limits).toEqual([3, 2, 1, 1]);
  });

  it('with a limit of one, patches every file in this thread, even when told to start the threads first', async () => {
    const tree = await treeIn(scratch(), libraries(2));
    const files = await scheduler('answer', 1, 8, true);
    const taken: TakenFile[] = [];
    for (const item of fileItems(tree)) taken.push(await files.take(item));
    await files.finish();
    await files.close();
    expect(taken.every((file) => 'outcome' in file)).toBe(true);
    expect((await Promise.all(taken.map(outcomeOf))).map(where)).toEqual(['skipped here', 'patched here', 'patched here']);
    expect(files.workerThreads).toBe(0);
  });

  it('with threads from the start: starts them all, sends them every ELF file, and tells the others apart here', async () => {
    const tree = await treeIn(scratch(), {
      ...libraries(3),
      'lib-00.so.1': { hardLink: 'lib-00.so' },
      'broken.so': truncatedElf(),
    });
    const files = await scheduler('answer', 4, 2, true);
    expect(files.workerThreads).toBe(2);
    const taken: [string, TakenFile][] = [];
    for (const item of fileItems(tree)) taken.push([item.relativePath, await files.take(item)]);
    await files.finish();
    const outcomes = await Promise.all(taken.map(async ([name, file]) => [name, 'later' in file, where(await outcomeOf(file))]));
    await files.close();
    expect(outcomes).toEqual([
      ['README', false, 'skipped here'],
      // Its first bytes are ELF's: a thread finds it cut short.
      ['broken.so', true, 'worker'],
      ['lib-00.so', true, 'worker'],
      ['lib-00.so.1', false, 'skipped here'],
      ['lib-01.so', true, 'worker'],
      ['lib-02.so', true, 'worker'],
    ]);
    expect(files.workerThreads).toBe(2);
  });

  it('starts a thread per ELF file waiting, up to the limit; files still waiting when the walk ends are patched here', async () => {
    const tree = await treeIn(scratch(), libraries(5));
    // The threads never say they are ready: every ELF file waits for one, then is patched here.
    const files = await scheduler('never-ready', 3, 8, false);
    const started: number[] = [];
    const pending: Promise<FileOutcome>[] = [];
    for (const item of fileItems(tree)) {
      pending.push(outcomeOf(await files.take(item)));
      started.push(files.workerThreads);
    }
    await files.finish();
    const outcomes = await Promise.all(pending);
    await files.close();
    expect(started).toEqual([0, 1, 2, 3, 3, 3]);
    expect(outcomes.map(where)).toEqual(['skipped here', ...Array(5).fill('patched here')]);
    expect(outcomes[1]).toMatchObject({ status: 'patched', newRunpath: '/run/opengl-driver/lib:/opt/corpus/lld' });
  });

  it('keeps at most 32 files per thread in flight to the threads', async () => {
    const cap = 2 * 32;
    const tree = await treeIn(scratch(), libraries(cap + 6));
    const files = await scheduler('hold', 2, 2, true);
    const channel = new BroadcastChannel(HOLD_CHANNEL);
    try {
      // Released once the threads hold as many files as the cap allows (more, if the cap failed).
      const received = new Map<number, number>();
      const full = new Promise<void>((resolve) => {
        channel.onmessage = (event) => {
          const { threadId, received: count } = (event as { data: { threadId: number; received: number } }).data;
          received.set(threadId, count);
          if ([...received.values()].reduce((a, b) => a + b, 0) >= cap) resolve();
        };
      });
      const pending: Promise<FileOutcome>[] = [];
      for (const item of fileItems(tree)) pending.push(outcomeOf(await files.take(item)));
      await files.finish();
      await full;
      channel.postMessage('release');
      const outcomes = (await Promise.all(pending)).map(where);
      const count = (what: string): number => outcomes.filter((outcome) => outcome === what).length;
      expect([count('skipped here'), count('held'), count('after')]).toEqual([1, cap, 6]);
    } finally {
      channel.close();
      await files.close();
    }
    // A cap below the files the test waits for would leave it waiting: that fails here, not at the tier's limit.
  }, 10_000);
});
