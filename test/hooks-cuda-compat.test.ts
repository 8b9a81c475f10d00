// cuda_compat in a built tree, through the CLI on real files: the demo of fixtures/nix built with the
// setup hooks (cuda_compat's directory first; bin/greet loads its libcuda.so.1), then a driver-only
// apply that puts the driver's directory ahead of it (a warning, once per run; the real loader then
// finds the driver's libcuda), and --drop-cuda-compat, which takes it out in one write (check gates it,
// and the bytes of the dropped entry are zeroed, so Nix no longer sees a reference to cuda_compat).

import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { runCli, stderrLines } from './helpers/run-cli.js';
import { VERSION, buildWithHooks, expectBuilt, greetReport, runGreet, runpathOf, usePackages, type Build } from './helpers/shim-stdenv.js';
import { snapshotTree } from './helpers/tree-tools.js';

const packages = usePackages();

/** The demo built with the driver, cuda_compat and stubs hooks, as a Jetson build is: cuda_compat's libcuda loads. */
async function compatTree(): Promise<Build> {
  const { compatEntry, driverEntry } = packages();
  const build = await buildWithHooks(packages(), { hooks: ['driver', 'compat', 'stubs'] });
  expectBuilt(build);
  expect(await runpathOf(build.libgreet)).toBe(`${compatEntry}:${driverEntry}`);
  expect(await runpathOf(build.greet)).toBe(`${compatEntry}:${driverEntry}:${build.lib}/lib`);
  expect((await runGreet(build)).stdout).toBe(greetReport(VERSION.compat));
  return build;
}

const driverOnly = (build: Build, command: string, ...flags: string[]): string[] => [
  command,
  build.out,
  build.lib,
  '--driver-link',
  packages().driverLink,
  ...flags,
];

describe('a driver-only run over a tree patched with --cuda-compat', () => {
  it("warns once, with the count and one file, and the loader then finds the driver's libcuda first", async () => {
    const { compatEntry, driverEntry, cudaCompat } = packages();
    const build = await compatTree();
    const warning = (command: string, verb: string): string =>
      `cuda-patchelf ${command}: warning: 2 files ${verb} the driver's directory ahead of a directory that came first and holds a libcuda.so.1 of its own, as cuda_compat's does, ` +
      `e.g. ${build.libgreet}: ${driverEntry} before ${compatEntry}; give --cuda-compat ${cudaCompat} to keep it first, or --drop-cuda-compat to take it out`;
    for (const command of ['plan', 'check']) {
      const dry = await runCli(driverOnly(build, command));
      expect(stderrLines(dry), command).toEqual([warning(command, 'would get')]);
    }
    const applied = await runCli(driverOnly(build, 'apply'));
    expect(applied.code).toBe(0);
    expect(stderrLines(applied)).toEqual([warning('apply', 'got')]);
    expect(await runpathOf(build.libgreet)).toBe(`${driverEntry}:${compatEntry}`);
    expect((await runGreet(build)).stdout).toBe(greetReport(VERSION.driver));
    // Done once, nothing moves again: no warning.
    const again = await runCli(driverOnly(build, 'apply'));
    expect(again.stdout).toContain('0 patched');
    expect(again.stderr).toBe('');
  });

  it('says nothing where cuda_compat stays first, or under --quiet', async () => {
    const build = await compatTree();
    const kept = await runCli(driverOnly(build, 'apply', '--cuda-compat', packages().cudaCompat, '--remove-stubs'));
    expect(kept.code).toBe(0);
    expect(kept.stderr).toBe('');
    const quiet = await runCli(driverOnly(build, 'apply', '--quiet'));
    expect(quiet.code).toBe(0);
    expect(quiet.stdout + quiet.stderr).toBe('');
    expect((await runGreet(build)).stdout).toBe(greetReport(VERSION.driver));
  });
});

describe('apply --drop-cuda-compat', () => {
  it("takes cuda_compat's directory out in one write, its bytes zeroed; check --drop-cuda-compat gates it", async () => {
    const { driverEntry } = packages();
    const build = await compatTree();
    const gate = await runCli(driverOnly(build, 'check', '--drop-cuda-compat'));
    expect(gate.code).toBe(1);
    expect(gate.stdout).toContain('cuda-patchelf check: 2 files need patching');
    const applied = await runCli(driverOnly(build, 'apply', '--drop-cuda-compat', '--json'));
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stderr).toBe('');
    const report = JSON.parse(applied.stdout) as { hooks: string[]; summary: { patched: Record<string, number> } };
    expect(report.hooks).toEqual(['driver', 'drop-cuda-compat']);
    expect(Object.values(report.summary.patched).reduce((a, b) => a + b, 0)).toBe(2);
    expect(await runpathOf(build.libgreet)).toBe(driverEntry);
    expect(await runpathOf(build.greet)).toBe(`${driverEntry}:${build.lib}/lib`);
    for (const file of [build.libgreet, build.greet]) expect((await readFile(file)).includes('cuda_compat'), file).toBe(false);
    expect((await runGreet(build)).stdout).toBe(greetReport(VERSION.driver));
    const passed = await runCli(driverOnly(build, 'check', '--drop-cuda-compat'));
    expect(passed.stdout).toBe('cuda-patchelf check: nothing to do\n');
    expect(passed.code).toBe(0);
  });

  it('works alone, with --no-driver: the other entries stay as they are', async () => {
    const { driverEntry } = packages();
    const build = await compatTree();
    const applied = await runCli(['apply', build.out, build.lib, '--no-driver', '--drop-cuda-compat']);
    expect(applied.code, applied.stderr).toBe(0);
    expect(await runpathOf(build.greet)).toBe(`${driverEntry}:${build.lib}/lib`);
    expect((await runGreet(build)).stdout).toBe(greetReport(VERSION.driver));
  });

  it('with --cuda-compat, is a usage error: exit 2, one line, nothing written', async () => {
    const build = await compatTree();
    const before = await snapshotTree(build.dir);
    const result = await runCli(driverOnly(build, 'apply', '--drop-cuda-compat', '--cuda-compat', packages().cudaCompat));
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(stderrLines(result)).toEqual(['cuda-patchelf: --drop-cuda-compat removes the directory --cuda-compat adds: give one of them']);
    expect([...(await snapshotTree(build.dir)).entries()]).toEqual([...before.entries()]);
  });
});
