// The hooks from each input list, with and without strictDeps, against Nixpkgs' hooks restated in
// fixtures/nix/nixpkgs/ (real patchelf, same builder, same demo). stdenv sources a hook from
// depsBuildBuild with hostOffset -1 and targetOffset -1, from nativeBuildInputs with -1 and 0, from
// buildInputs with 0 and 1. Nixpkgs' driver and cuda_compat hooks work from every list; its stubs hook,
// under strictDeps, from depsBuildBuild only. And under strictDeps stdenv keeps the programs of host inputs
// (buildInputs) off PATH: a hook installed with its cuda-patchelf filled in finds it all the same. The
// derivation docs/nix.md shows is built as it lists the hooks, with strictDeps and without.

import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from './helpers/fixtures.js';
import { cliPath } from './helpers/run-cli.js';
import {
  HOOK_FILES,
  HOOKS_DIR,
  VERSION,
  buildWithHooks,
  elfSearchPaths,
  expectBuilt,
  expectGreeting,
  installHook,
  runpathOf,
  shellQuote,
  usePackages,
  type BuildOptions,
  type HookName,
  EVERY_HOOK,
} from './helpers/shim-stdenv.js';

const packages = usePackages();
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
        const ours = await buildWithHooks(packages(), {
          ...inList(list, EVERY_HOOK),
          attrs: { ...attrs, cudaPatchelfFlags: '--nixpkgs-compat' },
        });
        const theirs = await buildWithHooks(packages(), { ...inList(list, EVERY_HOOK), attrs, flavour: 'nixpkgs' });
        expectBuilt(ours);
        expectBuilt(theirs);
        expect(await elfSearchPaths(ours)).toEqual(await elfSearchPaths(theirs));
        expect(await runpathOf(ours.libgreet)).toBe(
          stubsOut ? `${compatEntry}:${driverEntry}:${stubsDir}` : `${compatEntry}:${driverEntry}`,
        );
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
    const ours = await buildWithHooks(packages(), {
      depsBuildBuild: ['stubs'],
      hooks: ['compat', 'driver'],
      attrs: { ...strict, cudaPatchelfFlags: '--nixpkgs-compat' },
    });
    expectBuilt(ours);
    expect(await runpathOf(ours.libgreet)).toBe(`${compatEntry}:${driverEntry}`);
    // Nixpkgs' hooks sourced in the order they need, all from depsBuildBuild: the same bytes.
    const inOrder = await buildWithHooks(packages(), { depsBuildBuild: EVERY_HOOK, hooks: [], attrs: strict, flavour: 'nixpkgs' });
    expectBuilt(inOrder);
    expect(await elfSearchPaths(ours)).toEqual(await elfSearchPaths(inOrder));
    // Split like this, Nixpkgs' stubs hook is sourced first (stdenv sources depsBuildBuild before
    // nativeBuildInputs) and so runs first: the driver hook then adds the driver directory once more, and
    // before cuda_compat's.
    const split = await buildWithHooks(packages(), {
      depsBuildBuild: ['stubs'],
      hooks: ['compat', 'driver'],
      attrs: strict,
      flavour: 'nixpkgs',
    });
    expectBuilt(split);
    expect(await runpathOf(split.libgreet)).toBe(`${driverEntry}:${compatEntry}:${driverEntry}`);
  });
});

/** The package attribute of each hook (nix/package.nix), as a derivation names it. */
const HOOK_ATTRIBUTES: Readonly<Record<string, HookName>> = {
  autoAddDriverRunpathHook: 'driver',
  autoAddCudaCompatRunpathHook: 'compat',
  removeStubsFromRunpathHook: 'stubs',
};

/**
 * The hooks in each input list of the derivation under "## In a derivation" in docs/nix.md: every
 * `cuda-patchelf.<hook>` between `<list> =` and the `;` that ends it (lib.optionals included: a Jetson build).
 */
function hookListsOfNixDoc(text: string): Record<List, HookName[]> {
  const section = text.split(/^## In a derivation$/m)[1] ?? '';
  const example = /```nix\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  const lists: Record<List, HookName[]> = { depsBuildBuild: [], nativeBuildInputs: [], buildInputs: [] };
  for (const [, list, value] of example.matchAll(/\b(depsBuildBuild|nativeBuildInputs|buildInputs)\s*=([^;]*);/g)) {
    for (const [, attribute] of (value ?? '').matchAll(/cuda-patchelf\.(\w+)/g)) {
      const hook = HOOK_ATTRIBUTES[attribute ?? ''];
      if (hook === undefined) throw new Error(`docs/nix.md names cuda-patchelf.${attribute}, which is no hook`);
      lists[list as List].push(hook);
    }
  }
  return lists;
}

describe('the derivation of docs/nix.md', () => {
  it('lists each hook where it works, with strictDeps and without: the stubs entry gone, cuda_compat first', async () => {
    const { compatEntry, driverEntry } = packages();
    const lists = hookListsOfNixDoc(await readFile(join(REPO_ROOT, 'docs', 'nix.md'), 'utf8'));
    expect(Object.values(lists).flat().sort()).toEqual(['compat', 'driver', 'stubs']);
    for (const attrs of [{}, { strictDeps: '1' }] as Record<string, string>[]) {
      const build = await buildWithHooks(packages(), {
        hooks: lists.nativeBuildInputs,
        buildInputs: lists.buildInputs,
        depsBuildBuild: lists.depsBuildBuild,
        attrs,
      });
      expectBuilt(build);
      expect(build.result.stderr, JSON.stringify(attrs)).not.toContain('stays out');
      expect(await runpathOf(build.libgreet), JSON.stringify(attrs)).toBe(`${compatEntry}:${driverEntry}`);
      await expectGreeting(build, VERSION.compat);
    }
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
    const native = await buildWithHooks(packages(), {
      hooks: [],
      buildInputs: ['driver'],
      cli: 'nativeBuildInputs',
      attrs: { strictDeps: '1' },
    });
    expectBuilt(native);
    expect(native.calls).toHaveLength(1);
  });

  it('hooks installed with their cuda-patchelf filled in run it from any input list, unless CUDA_PATCHELF names another', async () => {
    const { root, driverLink, cudaCompat, driverEntry, compatEntry } = packages();
    const log = join(root, 'installed-cli.log');
    const installedCli = join(root, 'installed-cuda-patchelf');
    await writeFile(
      installedCli,
      `#!/usr/bin/env bash\necho "$@" >> ${shellQuote(log)}\nexec ${shellQuote(process.execPath)} ${shellQuote(cliPath)} "$@"\n`,
      { mode: 0o755 },
    );
    const fixup = join(HOOKS_DIR, 'cuda-patchelf-fixup.sh');
    const install = (cli: string): Promise<string[]> =>
      Promise.all([
        installHook(root, `driver-hook-${cli.length}`, HOOK_FILES.driver, { driverLink, cudaPatchelf: cli, cudaPatchelfFixup: fixup }),
        installHook(root, `compat-hook-${cli.length}`, HOOK_FILES.compat, { cudaCompat, cudaPatchelf: cli, cudaPatchelfFixup: fixup }),
      ]);

    const hooks = await install(installedCli);
    const build = await buildWithHooks(packages(), {
      hooks: [],
      buildInputs: hooks,
      cli: 'none',
      envPaths: false,
      attrs: { strictDeps: '1' },
    });
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
