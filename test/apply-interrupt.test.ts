// Ctrl-C during apply, for real: SIGINT sent to a running `cuda-patchelf apply` over a tree of
// thousands of libraries, in the main thread and with worker threads. It must stop soon, say how many
// files it did, exit 130, and leave every file either patched whole or untouched (a write in flight is
// finished, none is started after the signal); apply again then does the rest.

import { spawn } from 'node:child_process';
import { copyFile, mkdir, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { beforeAll, describe, expect, it } from 'vitest';
import { newInterruptFlag, raiseInterrupt } from '../src/batch/interrupt.js';
import { patchTrees } from '../src/batch/patch-tree.js';
import { driverHook } from '../src/hook-engine/builtin-hooks.js';
import { orderHooks } from '../src/hook-engine/order-hooks.js';
import { fixture } from './helpers/fixtures.js';
import { assertCliBuilt, cliPath, runCli } from './helpers/run-cli.js';
import { parseReport, parseSummaryLine } from './helpers/tree-report.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { sha256File } from './helpers/tree-tools.js';

const LIBRARY = 'compiled/x86_64/libuser-runpath';
/** Enough files that apply is still at work when the signal lands (about 1 ms each on 2 busy cores). */
const FILES = 2500;
/** Files patched before the signal is sent: the run is well under way. */
const BEFORE_SIGNAL = 50;

let originalHash = '';
let patchedHash = '';

beforeAll(async () => {
  assertCliBuilt();
  const dir = await makeTempDir('interrupt-reference');
  const reference = join(dir, 'libuser.so');
  await copyFile(fixture(LIBRARY).path, reference);
  originalHash = await sha256File(reference);
  const applied = await runCli(['apply', dir]);
  if (applied.code !== 0) throw new Error(applied.stderr);
  patchedHash = await sha256File(reference);
  expect(patchedHash).not.toBe(originalHash);
});

async function libraryTree(label: string): Promise<string> {
  const root = await makeTempDir(label);
  await mkdir(join(root, 'lib'));
  const source = fixture(LIBRARY).path;
  for (let i = 0; i < FILES; i++) await copyFile(source, join(root, 'lib', `lib${String(i).padStart(4, '0')}.so`));
  return root;
}

interface Interrupted {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** From the signal to the process's exit. */
  readonly stopMs: number;
}

/**
 * Runs apply and sends it SIGINT once `ready` says so (given each stdout line as it comes, and polled
 * every 10 ms with no line).
 */
function applyAndInterrupt(args: readonly string[], ready: (line: string | null) => Promise<boolean>): Promise<Interrupted> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliPath, 'apply', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let signalledAt: number | null = null;
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const interruptIf = async (line: string | null): Promise<void> => {
      if (signalledAt !== null || !(await ready(line))) return;
      if (signalledAt !== null) return;
      signalledAt = performance.now();
      child.kill('SIGINT');
    };
    createInterface({ input: child.stdout }).on('line', (line) => {
      stdout += `${line}\n`;
      void interruptIf(line).catch(reject);
    });
    const poll = setInterval(() => void interruptIf(null).catch(reject), 10);
    const watchdog = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearInterval(poll);
      clearTimeout(watchdog);
      resolve({ code, signal, stdout, stderr, stopMs: signalledAt === null ? -1 : performance.now() - signalledAt });
    });
  });
}

/** Every file's state: patched whole, or untouched; never anything else. */
async function fileStates(root: string): Promise<{ patched: string[]; untouched: number; other: string[] }> {
  const patched: string[] = [];
  const other: string[] = [];
  let untouched = 0;
  for (const name of await readdir(join(root, 'lib'))) {
    const path = join(root, 'lib', name);
    const hash = await sha256File(path);
    if (hash === patchedHash) patched.push(path);
    else if (hash === originalHash) untouched++;
    else other.push(path);
  }
  return { patched: patched.sort(), untouched, other };
}

const INTERRUPTED_LINE =
  /^cuda-patchelf apply: interrupted: (\d+) files? done \((\d+) patched\), the others left untouched; apply again does the rest$/;

describe('Ctrl-C (SIGINT) during apply', () => {
  it.each([1, 2])('--jobs %i: stops, says how many files it did, exits 130, and every file is patched whole or untouched', async (jobs) => {
    const root = await libraryTree(`interrupt-jobs${jobs}`);
    let seen = 0;
    const run = await applyAndInterrupt(
      [root, '--verbose', '--jobs', String(jobs)],
      async (line) => (line?.startsWith('patched ') ?? false) && ++seen >= BEFORE_SIGNAL,
    );
    expect({ code: run.code, signal: run.signal }, run.stderr).toEqual({ code: 130, signal: null });

    const lines = run.stderr.split('\n').filter((line) => line !== '');
    expect(lines).toHaveLength(1);
    const match = INTERRUPTED_LINE.exec(lines[0] ?? '');
    expect(match, lines[0]).not.toBeNull();
    const done = Number(match?.[1]);
    const patched = Number(match?.[2]);
    // The files done are the ones listed, and the summary counts them.
    const listed = run.stdout
      .split('\n')
      .filter((line) => line.startsWith('patched '))
      .map((line) => line.slice('patched '.length, line.indexOf(': ')));
    expect(listed).toHaveLength(patched);
    expect(parseSummaryLine(run.stdout)).toMatchObject({ visited: done, patched, failed: 0 });
    expect(done).toBe(patched);
    expect(patched).toBeGreaterThanOrEqual(BEFORE_SIGNAL);
    expect(patched, 'it stopped well before the end').toBeLessThan(FILES / 2);
    expect(run.stopMs).toBeLessThan(10_000);

    // On disk: exactly the files it reported, each patched whole; the others byte-identical.
    const states = await fileStates(root);
    expect(states.other).toEqual([]);
    expect(states.patched).toEqual(listed.sort());
    expect(states.untouched).toBe(FILES - patched);
  });

  it('--json: the report says interrupted and lists the files done; apply again does the rest', async () => {
    const root = await libraryTree('interrupt-json');
    // The first file of the walk's order is among the first patched: once it changes, the run is under way.
    const first = join(root, 'lib', (await readdir(join(root, 'lib')))[0] ?? '');
    const before = (await stat(first)).mtimeMs;
    const run = await applyAndInterrupt([root, '--json', '--jobs', '2'], async () => (await stat(first)).mtimeMs !== before);
    expect({ code: run.code, signal: run.signal }, run.stderr).toEqual({ code: 130, signal: null });
    expect(run.stderr.trimEnd()).toMatch(INTERRUPTED_LINE);
    const report = parseReport(run.stdout);
    expect(report.interrupted).toBe(true);
    const states = await fileStates(root);
    expect(states.other).toEqual([]);
    expect(
      report.files
        .filter((file) => file.status === 'patched')
        .map((file) => file.path)
        .sort(),
    ).toEqual(states.patched);
    expect(report.files.length).toBeLessThan(FILES);
    expect(report.summary.visited).toBe(report.files.length);
    const again = await runCli(['apply', root, '--json'], { timeoutMs: 120_000 });
    expect(again.code, again.stderr).toBe(0);
    const rest = parseReport(again.stdout);
    expect(rest).toMatchObject({ interrupted: false, summary: { visited: FILES, unchanged: states.patched.length, failed: 0 } });
    expect(Object.values(rest.summary.patched).reduce((a, b) => a + b, 0)).toBe(FILES - states.patched.length);
    expect(await fileStates(root)).toMatchObject({ untouched: 0, other: [] });
  });
});

describe('Ctrl-C during --auto-patchelf phase 1', () => {
  // Phase 1 reads every file before any is planned, with synchronous reads: it gives the event loop a
  // turn (InterruptPoll) so that the signal is heard, and stops at the first file after the flag is up.
  // Raised before the run, the flag stops it before the first file: deterministic, where a real signal's
  // moment is not.
  it('the flag raised: phase 1 resolves nothing, the batch plans and writes nothing', async () => {
    const root = await makeTempDir('interrupt-phase1');
    await mkdir(join(root, 'lib'));
    for (let i = 0; i < 20; i++) await copyFile(fixture(LIBRARY).path, join(root, 'lib', `lib${i}.so`));
    const interrupt = newInterruptFlag();
    raiseInterrupt(interrupt);
    const autoPatchelf = {
      libs: [],
      runtimeDependencies: [],
      appendRpaths: [],
      ignoredMissing: () => false,
      interpreter: null,
      libcDir: null,
      keepLibc: false,
      relativeToTree: false,
      root: null,
      host: { cwd: process.cwd(), arch: process.arch },
    };
    const options = { hooks: orderHooks([driverHook()]), semantics: 'default' as const, jobs: 1, cpuCount: 1, dryRun: false };
    const result = await patchTrees([root], { ...options, interrupt, autoPatchelf });
    expect(result.resolution?.reports.size).toBe(0);
    expect(result.outcomes).toEqual([]);
    expect((await fileStates(root)).untouched).toBe(20);
    // Without the flag, the same run resolves and patches every file.
    const again = await patchTrees([root], { ...options, interrupt: newInterruptFlag(), autoPatchelf });
    expect(again.resolution?.reports.size).toBe(20);
    expect(Object.values(again.summary.patched).reduce((a, b) => a + b, 0)).toBe(20);
  });
});
