// When `apply` starts its worker threads (src/batch/schedule-files.ts): not for a tree without an ELF
// file, whatever --jobs says; with the first ELF file otherwise, the main thread patching files until a
// thread has loaded and then sending the threads only ELF files; with the batch under
// --threads-from-start, which sends them every ELF file. The report's `workerThreads` says how many started, and the files come out the
// same every way.

import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture } from './helpers/fixtures.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { parseReport, type TreeReport } from './helpers/tree-report.js';
import { contentDifferences, copyTree, makeTempDir, snapshotTree } from './helpers/tree-tools.js';

const COMPAT = '/nix/store/00000000000000000000000000000000-cuda_compat';
let scratch = '';
let textTree = '';
let mixedTree = '';

beforeAll(async () => {
  assertCliBuilt();
  scratch = await makeTempDir('apply-threads');
  textTree = join(scratch, 'text');
  await mkdir(join(textTree, 'share'), { recursive: true });
  for (let i = 0; i < 200; i++) await writeFile(join(textTree, 'share', `page-${i}.txt`), `page ${i}\n`);
  // Libraries first in walk order (lib/ before share/), then many files that are not ELF.
  mixedTree = join(scratch, 'mixed');
  await mkdir(join(mixedTree, 'lib'), { recursive: true });
  for (let i = 0; i < 64; i++) await copyFile(fixture('compiled/x86_64/libuser-runpath').path, join(mixedTree, 'lib', `libuser-${String(i).padStart(2, '0')}.so`));
  await copyTree(textTree, mixedTree);
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

  it('--threads-from-start starts all of them with the batch, ELF file or not', async () => {
    expect((await apply(textTree, '--jobs', '4', '--threads-from-start')).workerThreads).toBe(4);
  });

  it('the first ELF file starts them, and the files come out as with one thread, or with threads from the start', async () => {
    const trees = await Promise.all(['default', 'single', 'from-start'].map(async (name) => {
      const tree = join(scratch, name);
      await copyTree(mixedTree, tree);
      return tree;
    }));
    const [threaded, single, fromStart] = trees as [string, string, string];
    const report = await apply(threaded, '--jobs', '2');
    expect(report.workerThreads).toBe(2);
    expect(report.summary.patched).toEqual({ append: 64 });
    expect(report.summary.skipped).toEqual({ 'not-elf': 200 });
    expect((await apply(single, '--jobs', '1')).workerThreads).toBe(0);
    expect((await apply(fromStart, '--jobs', '2', '--threads-from-start')).workerThreads).toBe(2);
    const snapshot = await snapshotTree(single);
    expect(contentDifferences(await snapshotTree(threaded), snapshot)).toEqual([]);
    expect(contentDifferences(await snapshotTree(fromStart), snapshot)).toEqual([]);
    expect(contentDifferences(await snapshotTree(mixedTree), snapshot).length).toBe(64);
  });
});
