// When `apply` starts its worker threads (src/batch/schedule-files.ts): not for a tree without an ELF
// file, whatever --jobs says; with the first ELF file otherwise, the main thread patching files until a
// thread has loaded and then sending the threads only ELF files; with the batch under
// --threads-from-start, which sends them every ELF file. The report's `workerThreads` says how many started, and the files come out the
// same every way.
//
// How many: --jobs N at most, never more than the CPUs the CLI may run on (the expectations below
// take that count from this process, whose CPUs the CLI inherits, or pin the CLI to one CPU), nor more
// than the ELF files waiting. A --jobs that no machine's CPUs could match is a usage error.

import { readFileSync } from 'node:fs';
import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, requireTool } from './helpers/fixtures.js';
import { assertCliBuilt, runCli, stderrLines } from './helpers/run-cli.js';
import { parseReport, threadLimitHere, fullPoolHere, type TreeReport } from './helpers/tree-report.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { contentDifferences, copyTree, snapshotTree } from './helpers/tree-tools.js';

const COMPAT = '/nix/store/00000000000000000000000000000000-cuda_compat';
let scratch = '';
let textTree = '';
let mixedTree = '';
let threeLibraries = '';

beforeAll(async () => {
  assertCliBuilt();
  scratch = await makeTempDir('apply-threads');
  textTree = join(scratch, 'text');
  await mkdir(join(textTree, 'share'), { recursive: true });
  for (let i = 0; i < 200; i++) await writeFile(join(textTree, 'share', `page-${i}.txt`), `page ${i}\n`);
  // Libraries first in walk order (lib/ before share/), then many files that are not ELF.
  mixedTree = join(scratch, 'mixed');
  await mkdir(join(mixedTree, 'lib'), { recursive: true });
  for (let i = 0; i < 64; i++)
    await copyFile(fixture('compiled/x86_64/libuser-runpath').path, join(mixedTree, 'lib', `libuser-${String(i).padStart(2, '0')}.so`));
  await copyTree(textTree, mixedTree);
  // A package as a Nix build makes it: three libraries and their documentation.
  threeLibraries = join(scratch, 'three');
  await mkdir(join(threeLibraries, 'lib'), { recursive: true });
  for (const name of ['libuser-runpath', 'libuser-rpath', 'libgreet'])
    await copyFile(fixture(`compiled/x86_64/${name}`).path, join(threeLibraries, 'lib', `${name}.so`));
  await copyTree(textTree, threeLibraries);
});

afterAll(async () => {
  if (scratch !== '') await rm(scratch, { recursive: true, force: true });
});

async function apply(tree: string, ...flags: string[]): Promise<TreeReport> {
  const result = await runCli(['apply', tree, '--cuda-compat', COMPAT, '--json', ...flags]);
  expect(result.code, result.stderr).toBe(0);
  return parseReport(result.stdout);
}

describe('apply --jobs N starts its worker threads when there is ELF work for them', () => {
  it('a tree without an ELF file is done in the main thread', async () => {
    const report = await apply(textTree, '--jobs', '4');
    expect(report.summary.skipped).toEqual({ 'not-elf': 200 });
    expect(report.workerThreads).toBe(0);
  });

  it('--threads-from-start starts all of them with the batch, ELF file or not (never more than the CPUs)', async () => {
    expect((await apply(textTree, '--jobs', '4', '--threads-from-start')).workerThreads).toBe(fullPoolHere(4));
  });

  it('the first ELF file starts them, and the files come out as with one thread, or with threads from the start', async () => {
    const trees = await Promise.all(
      ['default', 'single', 'from-start'].map(async (name) => {
        const tree = join(scratch, name);
        await copyTree(mixedTree, tree);
        return tree;
      }),
    );
    const [threaded, single, fromStart] = trees as [string, string, string];
    const report = await apply(threaded, '--jobs', '2');
    // 64 libraries queue up faster than a thread loads: as many threads as the limit lets start.
    expect(report.workerThreads).toBe(fullPoolHere(2));
    expect(report.summary.patched).toEqual({ append: 64 });
    expect(report.summary.skipped).toEqual({ 'not-elf': 200 });
    expect((await apply(single, '--jobs', '1')).workerThreads).toBe(0);
    expect((await apply(fromStart, '--jobs', '2', '--threads-from-start')).workerThreads).toBe(fullPoolHere(2));
    const snapshot = await snapshotTree(single);
    expect(contentDifferences(await snapshotTree(threaded), snapshot)).toEqual([]);
    expect(contentDifferences(await snapshotTree(fromStart), snapshot)).toEqual([]);
    expect(contentDifferences(await snapshotTree(mixedTree), snapshot).length).toBe(64);
  });
});

/** The CLI run on one CPU of those this process may use, so that it sees exactly one. */
function onOneCpu(): string[] {
  const allowed = /^Cpus_allowed_list:\s*(\d+)/m.exec(readFileSync('/proc/self/status', 'utf8'));
  if (allowed === null) throw new Error('no Cpus_allowed_list in /proc/self/status');
  return [requireTool('taskset'), '-c', allowed[1] as string];
}

describe('--jobs N: at most N threads, never more than the CPUs or the ELF files waiting', () => {
  it('plan --jobs 64 on three libraries starts three threads at most, and no more than the CPUs', async () => {
    const result = await runCli(['plan', threeLibraries, '--cuda-compat', COMPAT, '--json', '--jobs', '64']);
    expect(result.code, result.stderr).toBe(0);
    const report = parseReport(result.stdout);
    expect(report.summary.patched).toEqual({ append: 3 });
    expect(report.jobs).toEqual({ asked: 64, limit: threadLimitHere(64) });
    expect(report.workerThreads).toBeLessThanOrEqual(Math.min(3, fullPoolHere(64)));
    // The first ELF file starts a thread wherever the limit allows one.
    expect(report.workerThreads).toBeGreaterThanOrEqual(Math.min(1, fullPoolHere(64)));
  });

  it('apply --jobs 8192, the most it takes, is capped the same way, and patches as --jobs 1 does', async () => {
    const [capped, single] = (await Promise.all(
      ['capped', 'single-thread'].map(async (name) => {
        const tree = join(scratch, name);
        await copyTree(threeLibraries, tree);
        return tree;
      }),
    )) as [string, string];
    const report = await apply(capped, '--jobs', '8192');
    expect(report.jobs).toEqual({ asked: 8192, limit: threadLimitHere(8192) });
    expect(report.workerThreads).toBeLessThanOrEqual(Math.min(3, fullPoolHere(8192)));
    expect((await apply(single, '--jobs', '1')).jobs).toEqual({ asked: 1, limit: 1 });
    const snapshot = await snapshotTree(single);
    expect(contentDifferences(await snapshotTree(capped), snapshot)).toEqual([]);
    expect(contentDifferences(await snapshotTree(threeLibraries), snapshot).length).toBe(3);
  });

  it('on one CPU, --jobs 64 patches in the main thread: a limit of 1, no worker thread', async () => {
    const tree = join(scratch, 'one-cpu');
    await copyTree(mixedTree, tree);
    const result = await runCli(['apply', tree, '--cuda-compat', COMPAT, '--json', '--jobs', '64'], { wrapper: onOneCpu() });
    expect(result.code, result.stderr).toBe(0);
    const report = parseReport(result.stdout);
    expect(report.jobs).toEqual({ asked: 64, limit: 1 });
    expect(report.workerThreads).toBe(0);
    expect(report.summary.patched).toEqual({ append: 64 });
  });

  it.each(['8193', '100000'])(
    '--jobs %s is a usage error, one line, before the hook config is read and with nothing written',
    async (jobs) => {
      const tree = join(scratch, `refused-${jobs}`);
      await copyTree(threeLibraries, tree);
      const before = await snapshotTree(tree);
      // The config does not exist: reading it would be a usage error of its own, naming it.
      const result = await runCli(['apply', tree, '--config', join(scratch, 'no-such-hooks.json'), '--jobs', jobs]);
      expect(result.code).toBe(2);
      expect(result.stdout).toBe('');
      expect(stderrLines(result)).toEqual([
        `cuda-patchelf: --jobs takes at most 8192 (no Linux machine has more CPUs; a number above this one's ${availableParallelism()} is capped at ${availableParallelism()}), not "${jobs}"`,
      ]);
      expect(contentDifferences(await snapshotTree(tree), before)).toEqual([]);
    },
  );
});
