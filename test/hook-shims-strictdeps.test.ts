// The hooks from each input list, with and without strictDeps, against Nixpkgs' hooks restated in
// fixtures/nix/nixpkgs/ (real patchelf, same builder, same demo). stdenv sources a hook from
// depsBuildBuild with hostOffset -1 and targetOffset -1, from nativeBuildInputs with -1 and 0, from
// buildInputs with 0 and 1. Nixpkgs' driver and cuda_compat hooks work from every list; its stubs hook,
// under strictDeps, from depsBuildBuild only. And under strictDeps stdenv keeps the programs of host inputs
// (buildInputs) off PATH: a hook installed with its cuda-patchelf filled in finds it all the same.

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cliPath } from './helpers/run-cli.js';
import {
  HOOK_FILES,
  HOOKS_DIR,
  buildWithHooks,
  elfSearchPaths,
  expectBuilt,
  installHook,
  runpathOf,
  shellQuote,
  usePackages,
  type BuildOptions,
} from './helpers/shim-stdenv.js';

const packages = usePackages();
const ALL = ['driver', 'compat', 'stubs'] as const;
const LISTS = ['depsBuildBuild', 'nativeBuildInputs', 'buildInputs'] as const;
type List = (typeof LISTS)[number];

function inList(list: List, hooks: readonly string[]): Pick<BuildOptions, 'hooks' | 'buildInputs' | 'depsBuildBuild'> {
  if (list === 'nativeBuildInputs') return { hooks };
  return list === 'buildInputs' ? { hooks: [], buildInputs: hooks } : { hooks: [], depsBuildBuild: hooks };
}

describe('input lists and strictDeps', () => {
  for (const strictDeps of [false, true]) {
    for (const list of LISTS) {
      const stubsOut = strictDeps && list !== 'depsBuildBuild';
      it(`from ${list}${strictDeps ? ' under strictDeps' : ''}: what Nixpkgs' hooks give${stubsOut ? ', the stubs hook staying out' : ''}`, async () => {
        const { compatEntry, driverEntry, stubsDir } = packages();
        const attrs: Record<string, string> = strictDeps ? { strictDeps: '1' } : {};
        const ours = await buildWithHooks(packages(), { ...inList(list, ALL), attrs: { ...attrs, cudaPatchelfFlags: '--nixpkgs-compat' } });
        const theirs = await buildWithHooks(packages(), { ...inList(list, ALL), attrs, flavour: 'nixpkgs' });
        expectBuilt(ours);
        expectBuilt(theirs);
        expect(await elfSearchPaths(ours)).toEqual(await elfSearchPaths(theirs));
        expect(await runpathOf(ours.libgreet)).toBe(stubsOut ? `${compatEntry}:${driverEntry}:${stubsDir}` : `${compatEntry}:${driverEntry}`);
        const hostOffset = list === 'buildInputs' ? 0 : -1;
        const targetOffset = { depsBuildBuild: -1, nativeBuildInputs: 0, buildInputs: 1 }[list];
        const line = `cuda-patchelf hook: the remove-stubs hook stays out: under strictDeps it works from depsBuildBuild only (sourced with hostOffset=${hostOffset} targetOffset=${targetOffset})`;
        if (stubsOut) expect(ours.result.stderr).toContain(line);
        else expect(ours.result.stderr).not.toContain('stays out');
      });
    }
  }

  it('under strictDeps, the stubs hook from depsBuildBuild and the others from nativeBuildInputs: all of them work, the stubs rule last', async () => {
    const { compatEntry, driverEntry } = packages();
    const strict = { strictDeps: '1' };
    const ours = await buildWithHooks(packages(), { depsBuildBuild: ['stubs'], hooks: ['compat', 'driver'], attrs: { ...strict, cudaPatchelfFlags: '--nixpkgs-compat' } });
    expectBuilt(ours);
    expect(await runpathOf(ours.libgreet)).toBe(`${compatEntry}:${driverEntry}`);
    // Nixpkgs' hooks sourced in the order they need, all from depsBuildBuild: the same bytes.
    const inOrder = await buildWithHooks(packages(), { depsBuildBuild: ALL, hooks: [], attrs: strict, flavour: 'nixpkgs' });
    expectBuilt(inOrder);
    expect(await elfSearchPaths(ours)).toEqual(await elfSearchPaths(inOrder));
    // Split like this, Nixpkgs' stubs hook is sourced first (stdenv sources depsBuildBuild before
    // nativeBuildInputs) and so runs first: the driver hook then adds the driver directory once more, and
    // before cuda_compat's.
    const split = await buildWithHooks(packages(), { depsBuildBuild: ['stubs'], hooks: ['compat', 'driver'], attrs: strict, flavour: 'nixpkgs' });
    expectBuilt(split);
    expect(await runpathOf(split.libgreet)).toBe(`${driverEntry}:${compatEntry}:${driverEntry}`);
  });
});

describe('finding cuda-patchelf under strictDeps', () => {
  it('a cuda-patchelf among the buildInputs is off PATH under strictDeps (as stdenv wants), on it without', async () => {
    const strict = await buildWithHooks(packages(), { hooks: [], buildInputs: ['driver'], cli: 'buildInputs', attrs: { strictDeps: '1' } });
    expect(strict.result.code, strict.result.stderr).toBe(127);
    expect(strict.result.stderr).toContain('cuda-patchelf hook: error: cuda-patchelf is not on PATH');
    const loose = await buildWithHooks(packages(), { hooks: [], buildInputs: ['driver'], cli: 'buildInputs' });
    expectBuilt(loose);
    expect(loose.calls).toHaveLength(1);
    const native = await buildWithHooks(packages(), { hooks: [], buildInputs: ['driver'], cli: 'nativeBuildInputs', attrs: { strictDeps: '1' } });
    expectBuilt(native);
    expect(native.calls).toHaveLength(1);
  });

  it('hooks installed with their cuda-patchelf filled in run it from any input list, unless CUDA_PATCHELF names another', async () => {
    const { root, driverLink, cudaCompat, driverEntry, compatEntry } = packages();
    const log = join(root, 'installed-cli.log');
    const installedCli = join(root, 'installed-cuda-patchelf');
    await writeFile(installedCli, `#!/usr/bin/env bash\necho "$@" >> ${shellQuote(log)}\nexec ${shellQuote(process.execPath)} ${shellQuote(cliPath)} "$@"\n`, { mode: 0o755 });
    const fixup = join(HOOKS_DIR, 'cuda-patchelf-fixup.sh');
    const install = (cli: string): Promise<string[]> =>
      Promise.all([
        installHook(root, `driver-hook-${cli.length}`, HOOK_FILES.driver, { driverLink, cudaPatchelf: cli, cudaPatchelfFixup: fixup }),
        installHook(root, `compat-hook-${cli.length}`, HOOK_FILES.compat, { cudaCompat, cudaPatchelf: cli, cudaPatchelfFixup: fixup }),
      ]);

    const hooks = await install(installedCli);
    const build = await buildWithHooks(packages(), { hooks: [], buildInputs: hooks, cli: 'none', envPaths: false, attrs: { strictDeps: '1' } });
    expectBuilt(build);
    expect(await runpathOf(build.libgreet)).toBe(`${compatEntry}:${driverEntry}:${packages().stubsDir}`);
    expect(build.result.stderr).toContain(`cuda-patchelf hook: running cuda-patchelf apply (driver cuda-compat) over 2 output(s)`);

    const missing = await install('/nonexistent/cuda-patchelf');
    const broken = await buildWithHooks(packages(), { hooks: missing, cli: 'path', envPaths: false });
    expect(broken.result.code).toBe(127);
    expect(broken.result.stderr).toContain('/nonexistent/cuda-patchelf: No such file or directory');
    const overridden = await buildWithHooks(packages(), { hooks: missing, cli: 'env', envPaths: false });
    expectBuilt(overridden);
    expect(overridden.calls).toHaveLength(1);
  });
});
