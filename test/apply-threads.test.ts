// When `apply` starts its worker threads (src/batch/threads-after.ts): not for a tree without ELF work,
// whatever --jobs says; with the first file under --threads-after 0; once the ELF files patched in the
// main thread have taken --threads-after. The report's `workerThreads` says how many started, and the
// files come out the same every way.

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
let libraryTree = '';

beforeAll(async () => {
  assertCliBuilt();
  scratch = await makeTempDir('apply-threads');
  textTree = join(scratch, 'text');
  await mkdir(join(textTree, 'share'), { recursive: true });
  for (let i = 0; i < 200; i++) await writeFile(join(textTree, 'share', `page-${i}.txt`), `page ${i}\n`);
  libraryTree = join(scratch, 'libraries');
  await mkdir(join(libraryTree, 'lib'), { recursive: true });
  for (let i = 0; i < 64; i++) await copyFile(fixture('compiled/x86_64/libuser-runpath').path, join(libraryTree, 'lib', `libuser-${i}.so`));
});

afterAll(async () => {
  if (scratch !== '') await rm(scratch, { recursive: true, force: true });
});

async function apply(tree: string, ...flags: string[]): Promise<TreeReport> {
  const result = await runCli(['apply', tree, '--cuda-compat', COMPAT, '--json', ...flags]);
  expect(result.code, result.stderr).toBe(0);
  return parseReport(result.stdout);
}

describe('apply --jobs 4 starts its worker threads only when the ELF work pays for them', () => {
  it('a tree without an ELF file is done in the main thread', async () => {
    const report = await apply(textTree, '--jobs', '4');
    expect(report.summary.skipped).toEqual({ 'not-elf': 200 });
    expect(report.workerThreads).toBe(0);
  });

  it('--threads-after 0 starts all of them with the first file, ELF or not', async () => {
    expect((await apply(textTree, '--jobs', '4', '--threads-after', '0')).workerThreads).toBe(4);
  });

  it('ELF work past --threads-after starts them, and the files come out as with one thread', async () => {
    const threaded = join(scratch, 'threaded');
    const single = join(scratch, 'single');
    await copyTree(libraryTree, threaded);
    await copyTree(libraryTree, single);
    // Each library takes well over 1/64 ms to plan and write, so the pool starts before the last ones.
    const report = await apply(threaded, '--jobs', '2', '--threads-after', '1');
    expect(report.workerThreads).toBe(2);
    expect(report.summary.patched).toEqual({ append: 64 });
    expect((await apply(single, '--jobs', '1')).workerThreads).toBe(0);
    expect(contentDifferences(await snapshotTree(threaded), await snapshotTree(single))).toEqual([]);
  });

  it('--threads-after takes milliseconds, 0 or more', async () => {
    for (const value of ['-1', 'soon', '']) {
      const result = await runCli(['apply', textTree, '--threads-after', value]);
      expect(result.code, value).toBe(2);
      expect(result.stderr).toMatch(/--threads-after takes a number of milliseconds, 0 or more/);
    }
  });
});
