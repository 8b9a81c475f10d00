// A worker thread that dies during `apply --jobs 2` fails the file it was patching, and only that file:
// the run finishes with exit 3, and every other file comes out as a --jobs 1 run leaves it. The thread
// dies for real, three ways: process.exit in the thread, an exception that escapes the file's work
// (uncaught: the thread's 'error', then its exit), and worker.terminate() from the main thread while the
// thread is busy. More deaths than the pool replaces: the files left fail with a clear error, no hang.
//
// Nothing in the product knows about this: a module loaded into the CLI's process with node --import
// (which Node loads into every worker thread too) wraps the fs calls of the thread that opens a victim.

import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPAT_DIR } from './campaign/kill-campaign.js';
import { fixture, requireTool } from './helpers/fixtures.js';
import { assertCliBuilt, runCli, stderrLines, type CliResult } from './helpers/run-cli.js';
import { parseReport, type ReportFile, type TreeReport } from './helpers/tree-report.js';
import { copyTree, snapshotTree, type TreeSnapshot } from './helpers/tree-tools.js';
import { makeTempDir } from './helpers/temp-dir.js';

type DeathMode = 'exit' | 'throw' | 'terminate';

interface KillPlan {
  readonly victims: readonly string[];
  readonly mode: DeathMode;
}

/** The exit code the 'exit' mode's thread exits with. */
const EXIT_CODE = 7;

/**
 * Runs first in every thread of the CLI's process. It is sent as source text (Function#toString), so it
 * uses nothing but its arguments and globals. A worker thread that opens a victim dies:
 * - exit: process.exit(EXIT_CODE) there and then;
 * - throw: opening the victim queues an exception on the thread's next tick, outside any promise the
 *   file's work awaits, so nothing catches it (a failure inside the work is the file's, not the
 *   thread's). The tick runs as soon as the work first waits on the event loop: planning reads
 *   synchronously, so that is the write's lock, before a byte is written;
 * - terminate: the thread asks the main thread to terminate it and blocks until it does.
 * In every mode the thread dies before it writes a byte of the victim.
 */
function installKillHook(
  fs: typeof import('node:fs'),
  threads: typeof import('node:worker_threads'),
  syncBuiltinESMExports: () => void,
  plan: KillPlan,
  exitCode: number,
): void {
  const channel = new BroadcastChannel('cuda-patchelf-worker-death-test');
  channel.unref();
  const mutable = (module: object): Record<string, unknown> => module as Record<string, unknown>;
  if (threads.isMainThread) {
    if (plan.mode !== 'terminate') return;
    const started = new Map<number, InstanceType<typeof threads.Worker>>();
    const Base = threads.Worker;
    mutable(threads).Worker = class extends Base {
      constructor(...args: ConstructorParameters<typeof Base>) {
        super(...args);
        started.set(this.threadId, this);
      }
    };
    channel.onmessage = (event) => void started.get((event as { data: number }).data)?.terminate();
    syncBuiltinESMExports();
    return;
  }
  const victims = new Set(plan.victims);
  const { openSync } = fs;
  mutable(fs).openSync = (...args: Parameters<typeof openSync>): number => {
    const path = args[0];
    if (typeof path !== 'string' || !victims.has(path)) return openSync(...args);
    victims.delete(path);
    if (plan.mode === 'exit') process.exit(exitCode);
    if (plan.mode === 'terminate') {
      channel.postMessage(threads.threadId);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
    }
    if (plan.mode === 'throw') {
      process.nextTick(() => {
        throw new Error('the test kills this thread');
      });
    }
    return openSync(...args);
  };
  syncBuiltinESMExports();
}

let scratch: string;
let pristine: string;
let pristineSnapshot: TreeSnapshot;
/** The pristine tree after apply --jobs 1, and its report: what every other file must come out as. */
let reference: { snapshot: TreeSnapshot; files: Map<string, ReportFile> };

const RUN_MS = 60_000;
const apply = (root: string, jobs: number, wrapper?: readonly string[]): Promise<CliResult> =>
  // --threads-from-start: the pool starts with the batch, so that every ELF file is a worker thread's.
  runCli(['apply', root, '--cuda-compat', COMPAT_DIR, '--json', '--jobs', String(jobs), '--threads-from-start'], {
    timeoutMs: RUN_MS,
    ...(wrapper === undefined ? {} : { wrapper }),
  });

/** Shared libraries, executables and files that are not ELF, in a few directories. */
async function buildTree(root: string): Promise<void> {
  for (const dir of ['lib', 'bin', 'share']) await mkdir(join(root, dir), { recursive: true });
  for (let i = 0; i < 20; i++) {
    const n = String(i).padStart(2, '0');
    await copyFile(fixture('compiled/x86_64/libuser-runpath').path, join(root, 'lib', `libuser-${n}.so`));
    await copyFile(fixture('compiled/x86_64/pie-runpath').path, join(root, 'bin', `prog-${n}`));
    await writeFile(join(root, 'share', `notes-${n}.txt`), `notes ${n}\n`);
  }
}

/** The report's files by path relative to `root`. */
function filesOf(report: TreeReport, root: string): Map<string, ReportFile> {
  return new Map(report.files.map((file) => [file.path.slice(root.length + 1), file]));
}

/** Applies with --jobs 2 to a copy of the pristine tree, with the kill hook loaded. */
async function applyKilling(
  name: string,
  victims: readonly string[],
  mode: DeathMode,
): Promise<{ root: string; result: CliResult; files: Map<string, ReportFile>; snapshot: TreeSnapshot }> {
  const root = join(scratch, name);
  await copyTree(pristine, root);
  const hook = join(scratch, `${name}-hook.mjs`);
  const plan: KillPlan = { victims: victims.map((victim) => join(root, victim)), mode };
  await writeFile(
    hook,
    [
      "import fs from 'node:fs';",
      "import { syncBuiltinESMExports } from 'node:module';",
      "import threads from 'node:worker_threads';",
      `(${installKillHook.toString()})(fs, threads, syncBuiltinESMExports, ${JSON.stringify(plan)}, ${EXIT_CODE});`,
    ].join('\n'),
  );
  const result = await apply(root, 2, [requireTool('env'), `NODE_OPTIONS=--import=${hook}`]);
  expect(result.signal, 'apply finished on its own').toBeNull();
  return { root, result, files: filesOf(parseReport(result.stdout), root), snapshot: await snapshotTree(root) };
}

/** The sha256 of a file in a snapshot; undefined for anything else. */
function sha(snapshot: TreeSnapshot, path: string): string | undefined {
  const entry = snapshot.get(path);
  return entry?.type === 'file' ? entry.sha256 : undefined;
}

/** Files that do not come out as in the --jobs 1 run, outcome or bytes; `excused` files are left out. */
function differencesFromReference(run: { files: Map<string, ReportFile>; snapshot: TreeSnapshot }, excused: ReadonlySet<string>): string[] {
  const problems: string[] = [];
  for (const [path, expected] of reference.files) {
    if (excused.has(path)) continue;
    const got = run.files.get(path);
    if (got === undefined) problems.push(`${path}: no outcome`);
    else if (got.status !== expected.status || got.tier !== expected.tier || got.newRunpath !== expected.newRunpath)
      problems.push(`${path}: ${got.status} ${got.error?.message ?? ''}`);
  }
  for (const path of reference.snapshot.keys()) {
    if (!excused.has(path) && sha(run.snapshot, path) !== sha(reference.snapshot, path))
      problems.push(`${path}: bytes differ from the --jobs 1 run`);
  }
  return problems.sort();
}

const died = (exit: string): RegExp =>
  new RegExp(
    `^the worker thread patching this file died \\(${exit}\\); the file is unchanged, part-way or fully patched \\(every write leaves it valid\\): run apply again to finish it$`,
  );

beforeAll(async () => {
  assertCliBuilt();
  scratch = await makeTempDir('worker-death');
  pristine = join(scratch, 'pristine');
  await buildTree(pristine);
  pristineSnapshot = await snapshotTree(pristine);
  const root = join(scratch, 'jobs-1');
  await copyTree(pristine, root);
  const result = await apply(root, 1);
  expect(result.code, result.stderr).toBe(0);
  reference = { snapshot: await snapshotTree(root), files: filesOf(parseReport(result.stdout), root) };
  expect([...reference.files.values()].filter((file) => file.status === 'patched')).toHaveLength(40);
}, 120_000);
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('a worker thread that dies while apply --jobs 2 runs', () => {
  const victim = 'lib/libuser-07.so';
  it.each([
    ['exit', `exit code ${EXIT_CODE}`],
    ['throw', 'exit code 1: Error: the test kills this thread'],
    ['terminate', 'exit code 1'],
  ] as const)(
    '%s: fails the file it was patching, and every other file comes out as with --jobs 1',
    async (mode, exit) => {
      const run = await applyKilling(mode, [victim], mode);
      expect(run.result.code, run.result.stderr).toBe(3);
      const failed = [...run.files].filter(([, file]) => file.status === 'failed');
      expect(failed.map(([path, file]) => [path, file.error?.message])).toEqual([[victim, expect.stringMatching(died(exit))]]);
      expect(stderrLines(run.result)).toEqual([
        // A thread that died is no bug of cuda-patchelf: the line says what happened, not "internal error".
        expect.stringContaining(`${join(run.root, victim)}: the worker thread patching this file died`),
      ]);
      expect(sha(run.snapshot, victim), 'the thread died before it wrote a byte of the victim').toBe(sha(pristineSnapshot, victim));
      expect(differencesFromReference(run, new Set([victim]))).toEqual([]);
    },
    120_000,
  );
});

describe('more worker threads die than the pool replaces', () => {
  it('fails each victim, and the files no thread is left for, with a clear error; the rest as with --jobs 1', async () => {
    // Two threads and three replacements: five threads for six victims, so the last threads run out.
    const victims = ['bin/prog-01', 'bin/prog-05', 'lib/libuser-02.so', 'lib/libuser-09.so', 'lib/libuser-13.so', 'lib/libuser-18.so'];
    const run = await applyKilling('exhausted', victims, 'exit');
    expect(run.result.code, run.result.stderr).toBe(3);
    const failed = [...run.files].filter(([, file]) => file.status === 'failed');
    const deaths = failed.filter(([, file]) => died(`exit code ${EXIT_CODE}`).test(file.error?.message ?? ''));
    const orphans = failed.filter(
      ([, file]) => file.error?.message === 'no worker thread is left to patch this file (5 died in this run); left alone',
    );
    expect(deaths, 'one file per thread that died').toHaveLength(5);
    expect(deaths.every(([path]) => victims.includes(path))).toBe(true);
    const orphaned = new Set(orphans.map(([path]) => path));
    expect(
      victims.filter((path) => !deaths.some(([dead]) => dead === path) && !orphaned.has(path)),
      'the victim no thread was left for',
    ).toEqual([]);
    expect(failed.length).toBe(deaths.length + orphans.length);
    expect(stderrLines(run.result)).toHaveLength(failed.length);
    expect(
      failed.filter(([path]) => sha(run.snapshot, path) !== sha(pristineSnapshot, path)).map(([path]) => path),
      'failed files are left as they were',
    ).toEqual([]);
    expect(differencesFromReference(run, new Set(failed.map(([path]) => path)))).toEqual([]);
  }, 120_000);
});
