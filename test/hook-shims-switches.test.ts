// What turns the hooks of hooks/ on, off and where they take their paths from, in a builder that follows
// the stdenv hook protocol: each dontUse… switch (also set after the hooks were sourced), the @placeholder@
// filled at install time as makeSetupHook does (it wins over the environment), the environment variables,
// the default driver link, cudaPatchelfFlags as a string and as an array, CUDA_PATCHELF, and NIX_DEBUG.

import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  HOOK_FILES,
  HOOKS_DIR,
  STUB_REPORT,
  VERSION,
  buildWithHooks,
  expectBuilt,
  greetReport,
  runGreet,
  runpathOf,
  usePackages,
} from './helpers/shim-stdenv.js';
import { sha256File } from './helpers/tree-tools.js';

const packages = usePackages();
const ALL = ['driver', 'compat', 'stubs'] as const;

describe('switches', () => {
  it('dontUseAutoAddDriverRunpath leaves the driver out: cuda_compat only', async () => {
    const { compatEntry } = packages();
    const build = await buildWithHooks(packages(), { hooks: ALL, attrs: { dontUseAutoAddDriverRunpath: '1' } });
    expectBuilt(build);
    expect(build.calls[0]).toContain('--no-driver');
    expect(await runpathOf(build.libgreet)).toBe(compatEntry);
    expect(await runpathOf(build.greet)).toBe(`${compatEntry}:${build.lib}/lib`);
    expect((await runGreet(build)).stdout).toBe(greetReport(VERSION.compat));
  });

  it('dontUseAutoAddCudaCompatRunpath leaves cuda_compat out: the program loads the driver', async () => {
    const build = await buildWithHooks(packages(), { hooks: ALL, attrs: { dontUseAutoAddCudaCompatRunpath: '1' } });
    expectBuilt(build);
    expect(build.calls[0]).not.toContain('--cuda-compat');
    expect(await runpathOf(build.libgreet)).toBe(packages().driverEntry);
    expect((await runGreet(build)).stdout).toBe(greetReport(VERSION.driver));
  });

  it('dontUseRemoveStubsFromRunpath keeps the stubs entry (behind the others)', async () => {
    const { compatEntry, driverEntry, stubsDir } = packages();
    const build = await buildWithHooks(packages(), { hooks: ALL, attrs: { dontUseRemoveStubsFromRunpath: '1' } });
    expectBuilt(build);
    expect(await runpathOf(build.libgreet)).toBe(`${compatEntry}:${driverEntry}:${stubsDir}`);
    expect((await runGreet(build)).stdout).toBe(greetReport(VERSION.compat));
  });

  it('with every hook off nothing runs and nothing changes, even without a cuda-patchelf to run', async () => {
    const reference = await buildWithHooks(packages(), { hooks: [] });
    const build = await buildWithHooks(packages(), {
      hooks: ALL,
      cli: 'none',
      attrs: { dontUseAutoAddDriverRunpath: '1', dontUseAutoAddCudaCompatRunpath: '1', dontUseRemoveStubsFromRunpath: '1' },
    });
    expectBuilt(build);
    expect(build.calls).toEqual([]);
    expect(build.result.stderr).toContain('every hook is off: nothing to do');
    expect(await sha256File(build.libgreet)).toBe(await sha256File(reference.libgreet));
    expect((await runGreet(build)).stdout).toBe(STUB_REPORT);
  });

  it('reads the switches at fixup time: one set by an earlier phase counts', async () => {
    const build = await buildWithHooks(packages(), { hooks: ALL, attrs: { preFixup: 'dontUseAutoAddCudaCompatRunpath=1' } });
    expectBuilt(build);
    expect(await runpathOf(build.libgreet)).toBe(packages().driverEntry);
  });

  it('uses the paths filled in at install time before the environment, and the fixup script they name', async () => {
    const { compatEntry, driverEntry } = packages();
    // Installed as makeSetupHook installs a hook: placeholders replaced, the file alone in its package.
    const build0 = await buildWithHooks(packages(), { hooks: [] });
    const installed: string[] = [];
    for (const [name, substitutions] of [
      ['driver', { driverLink: packages().driverLink }],
      ['compat', { cudaCompat: packages().cudaCompat }],
    ] as const) {
      const hook = join(build0.dir, `${name}-setup-hook`);
      let text = await readFile(HOOK_FILES[name], 'utf8');
      for (const [key, value] of Object.entries({ ...substitutions, cudaPatchelfFixup: join(HOOKS_DIR, 'cuda-patchelf-fixup.sh') })) {
        text = text.replaceAll(`@${key}@`, value);
      }
      await writeFile(hook, text);
      installed.push(hook);
    }
    const build = await buildWithHooks(packages(), {
      hooks: installed,
      attrs: { CUDA_PATCHELF_DRIVER_LINK: '/wrong/driver-link', CUDA_PATCHELF_CUDA_COMPAT: '/wrong/cuda_compat' },
    });
    expectBuilt(build);
    expect(await runpathOf(build.libgreet)).toBe(`${compatEntry}:${driverEntry}:${packages().stubsDir}`);
    expect((await runGreet(build)).stdout).toBe(greetReport(VERSION.compat));
  });

  it('takes the paths from the environment when nothing was filled in, and /run/opengl-driver when not even that', async () => {
    const fromEnv = await buildWithHooks(packages(), { hooks: ['driver', 'compat'] });
    expectBuilt(fromEnv);
    expect(fromEnv.calls[0]).toEqual(expect.arrayContaining(['--driver-link', packages().driverLink, '--cuda-compat', packages().cudaCompat]));
    const byDefault = await buildWithHooks(packages(), { hooks: ['driver'], envPaths: false });
    expectBuilt(byDefault);
    expect(await runpathOf(byDefault.libgreet)).toBe(`/run/opengl-driver/lib:${packages().stubsDir}`);
  });

  it('passes cudaPatchelfFlags to cuda-patchelf apply, as a string or (structured attributes) as an array', async () => {
    const reference = await buildWithHooks(packages(), { hooks: [] });
    const asString = await buildWithHooks(packages(), { hooks: ALL, attrs: { cudaPatchelfFlags: '--dry-run --jobs 1' } });
    const asArray = await buildWithHooks(packages(), { hooks: ALL, attrs: { preFixup: "cudaPatchelfFlags=(--dry-run --stubs-pattern '/lib/stubs')" } });
    for (const build of [asString, asArray]) {
      expectBuilt(build);
      expect(build.calls[0]).toContain('--dry-run');
      expect(await sha256File(build.libgreet)).toBe(await sha256File(reference.libgreet));
    }
    expect(asString.calls[0]).toEqual(expect.arrayContaining(['--jobs', '1']));
    expect(asArray.calls[0]).toEqual(expect.arrayContaining(['--stubs-pattern', '/lib/stubs']));
  });

  it('runs the cuda-patchelf that CUDA_PATCHELF names when it is not on PATH', async () => {
    const build = await buildWithHooks(packages(), { hooks: ['driver'], cli: 'env' });
    expectBuilt(build);
    expect(build.calls).toHaveLength(1);
    expect(await runpathOf(build.libgreet)).toBe(`${packages().driverEntry}:${packages().stubsDir}`);
  });

  it('says what it sources, skips and runs under NIX_DEBUG, and only the essentials without it', async () => {
    const hooks = ['driver', 'compat', 'driver'];
    const quiet = await buildWithHooks(packages(), { hooks });
    const debug = await buildWithHooks(packages(), { hooks, attrs: { NIX_DEBUG: '1' } });
    expectBuilt(quiet);
    expectBuilt(debug);
    for (const build of [quiet, debug]) {
      expect(build.result.stderr).toContain(`cuda-patchelf hook: sourcing the driver hook (${packages().driverLink})`);
      expect(build.result.stderr).toContain('cuda-patchelf hook: running cuda-patchelf apply (driver cuda-compat) over 2 output(s)');
    }
    const debugOnly = [
      'cuda-patchelf hook: skipping the driver hook: already sourced',
      'cuda-patchelf hook: the driver hook was sourced with hostOffset=-1 targetOffset=0',
      `'--cuda-compat' '${packages().cudaCompat}'`,
      `-- '${debug.out}' '${debug.lib}'`,
    ];
    for (const line of debugOnly) {
      expect(debug.result.stderr).toContain(line);
      expect(quiet.result.stderr).not.toContain(line.replace(debug.out, quiet.out).replace(debug.lib, quiet.lib));
    }
  });
});
