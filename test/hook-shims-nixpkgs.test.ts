// The hooks of hooks/ against Nixpkgs' own, restated in fixtures/nix/nixpkgs/ and run with the real
// patchelf, in the same builder (fixtures/nix/setup.sh) on the same demo: for each switch and each set of
// hooks, every ELF file of every output must end with the runpath Nixpkgs' hooks give it, byte for byte
// with cudaPatchelfFlags=--nixpkgs-compat, and deduplicated (no empty entry, no repeat) by default. Beside
// bin/greet and lib/libgreet.so (whose one runpath entry is a stubs directory), the derivation's postFixup
// gives copies of the library the runpaths the stubs rule must get right: two stubs entries (the first
// becomes the driver directory, the second goes), the driver directory before or after a stubs entry,
// both shapes of stubs directory Nixpkgs knows, a stubs directory it does not know, an empty entry, no
// runpath at all, and a DT_RPATH.

import { describe, expect, it } from 'vitest';
import {
  HOOK_FILES,
  HOOKS_DIR,
  NIXPKGS_HOOK_FILES,
  NIXPKGS_HOOKS_DIR,
  buildWithHooks,
  dedupedRunpaths,
  elfSearchPaths,
  expectBuilt,
  installHook,
  shellQuote,
  usePackages,
  type Build,
  type BuildOptions,
  type HookName,
  type Packages,
  type SearchPath,
  EVERY_HOOK,
} from './helpers/shim-stdenv.js';

const packages = usePackages();

/** Copies of lib/libgreet.so and the runpath each gets in postFixup, before the hooks run. */
function oddRunpaths({ stubsDir, stubsOutputDir, driverEntry }: Packages): Record<string, { runpath: string | null; rpath?: true }> {
  const other = '/opt/other/lib';
  return {
    'libstubs-twice.so': { runpath: `${stubsDir}:${other}:${stubsOutputDir}` },
    'libdriver-first.so': { runpath: `${driverEntry}:${stubsDir}` },
    'libdriver-after.so': { runpath: `${other}:${stubsDir}:${driverEntry}` },
    'libstubs-output.so': { runpath: stubsOutputDir },
    // Nixpkgs' patterns are on the whole entry: any path with -cuda before /lib/stubs, none without.
    'libstubs-elsewhere.so': { runpath: `/opt/nvidia-cuda-12/lib/stubs:${other}` },
    'libnot-stubs.so': { runpath: `/usr/local/cuda/lib64/stubs:/usr/local/cuda/lib/stubs:${other}` },
    'libempty-entry.so': { runpath: `${other}::${stubsDir}` },
    'libno-runpath.so': { runpath: null },
    'librpath.so': { runpath: stubsDir, rpath: true },
  };
}

function postFixup(pkgs: Packages): string {
  return Object.entries(oddRunpaths(pkgs))
    .map(([name, { runpath, rpath }]) => {
      const file = `"$lib/lib/${name}"`;
      const set =
        runpath === null
          ? `patchelf --remove-rpath ${file}`
          : `patchelf ${rpath ? '--force-rpath ' : ''}--set-rpath ${shellQuote(runpath)} ${file}`;
      return `cp "$lib/lib/libgreet.so" ${file}; ${set}`;
    })
    .join('\n');
}

interface Scenario {
  readonly name: string;
  /** The hooks of hooks/ and the derivation's switches. */
  readonly hooks: readonly HookName[];
  readonly attrs: Readonly<Record<string, string>>;
  /** What Nixpkgs' hooks need for the same result: the hooks (none for a switch Nixpkgs lacks) and switches. */
  readonly nixpkgsHooks: readonly HookName[];
  readonly nixpkgsAttrs: Readonly<Record<string, string>>;
}

const SCENARIOS: readonly Scenario[] = [
  { name: 'every hook on', hooks: EVERY_HOOK, attrs: {}, nixpkgsHooks: EVERY_HOOK, nixpkgsAttrs: {} },
  {
    name: 'dontUseAutoAddDriverRunpath',
    hooks: EVERY_HOOK,
    attrs: { dontUseAutoAddDriverRunpath: '1' },
    nixpkgsHooks: EVERY_HOOK,
    nixpkgsAttrs: { dontUseAutoAddDriverRunpath: '1' },
  },
  {
    name: 'dontUseAutoAddOpenGLRunpath (deprecated)',
    hooks: EVERY_HOOK,
    attrs: { dontUseAutoAddOpenGLRunpath: '1' },
    nixpkgsHooks: EVERY_HOOK,
    nixpkgsAttrs: { dontUseAutoAddOpenGLRunpath: '1' },
  },
  // Nixpkgs' cuda_compat and stubs hooks have no switch: leaving the hook out is what the switch does.
  {
    name: 'dontUseAutoAddCudaCompatRunpath',
    hooks: EVERY_HOOK,
    attrs: { dontUseAutoAddCudaCompatRunpath: '1' },
    nixpkgsHooks: ['driver', 'stubs'],
    nixpkgsAttrs: {},
  },
  {
    name: 'dontUseRemoveStubsFromRunpath',
    hooks: EVERY_HOOK,
    attrs: { dontUseRemoveStubsFromRunpath: '1' },
    nixpkgsHooks: ['driver', 'compat'],
    nixpkgsAttrs: {},
  },
  {
    name: 'dontUseAutoAddDriverRunpath and dontUseAutoAddCudaCompatRunpath: the stubs hook alone',
    hooks: EVERY_HOOK,
    attrs: { dontUseAutoAddDriverRunpath: '1', dontUseAutoAddCudaCompatRunpath: '1' },
    nixpkgsHooks: ['driver', 'stubs'],
    nixpkgsAttrs: { dontUseAutoAddDriverRunpath: '1' },
  },
  { name: 'the driver hook alone', hooks: ['driver'], attrs: {}, nixpkgsHooks: ['driver'], nixpkgsAttrs: {} },
  { name: 'the cuda_compat hook alone', hooks: ['compat'], attrs: {}, nixpkgsHooks: ['compat'], nixpkgsAttrs: {} },
  { name: 'the stubs hook alone', hooks: ['stubs'], attrs: {}, nixpkgsHooks: ['stubs'], nixpkgsAttrs: {} },
];

async function build(options: BuildOptions): Promise<Build> {
  const done = await buildWithHooks(packages(), { ...options, attrs: { postFixup: postFixup(packages()), ...options.attrs } });
  expectBuilt(done);
  return done;
}

/** The shims' build in both semantics and Nixpkgs' build, each as the search paths of every ELF file. */
async function compare(
  shims: BuildOptions,
  nixpkgs: BuildOptions,
): Promise<{ ours: Record<string, SearchPath>; compat: Record<string, SearchPath>; theirs: Record<string, SearchPath> }> {
  const ours = await elfSearchPaths(await build(shims));
  const compat = await elfSearchPaths(await build({ ...shims, attrs: { ...shims.attrs, cudaPatchelfFlags: '--nixpkgs-compat' } }));
  const theirs = await elfSearchPaths(await build({ ...nixpkgs, flavour: 'nixpkgs' }));
  return { ours, compat, theirs };
}

describe("the hooks against Nixpkgs' own, switch by switch", () => {
  for (const scenario of SCENARIOS) {
    it(`${scenario.name}: the runpaths Nixpkgs gives, byte for byte with --nixpkgs-compat, deduplicated by default`, async () => {
      const { ours, compat, theirs } = await compare(
        { hooks: scenario.hooks, attrs: scenario.attrs },
        { hooks: scenario.nixpkgsHooks, attrs: scenario.nixpkgsAttrs },
      );
      expect(Object.keys(theirs)).toEqual(
        expect.arrayContaining([
          'out/bin/greet',
          'lib/lib/libgreet.so',
          ...Object.keys(oddRunpaths(packages())).map((name) => `lib/lib/${name}`),
        ]),
      );
      expect(compat).toEqual(theirs);
      expect(dedupedRunpaths(ours)).toEqual(dedupedRunpaths(theirs));
    });
  }

  it('the stubs rule, spelled out: the first stubs entry becomes the driver directory unless it came first, the others go', async () => {
    const { stubsDir, driverEntry, compatEntry } = packages();
    const { compat, theirs } = await compare({ hooks: ['stubs'], attrs: {} }, { hooks: ['stubs'], attrs: {} });
    const other = '/opt/other/lib';
    const expected: Record<string, string | null> = {
      'lib/lib/libgreet.so': driverEntry,
      'lib/lib/libstubs-twice.so': `${driverEntry}:${other}`,
      'lib/lib/libdriver-first.so': driverEntry,
      // Seen only after the stubs entry became it: Nixpkgs keeps both.
      'lib/lib/libdriver-after.so': `${other}:${driverEntry}:${driverEntry}`,
      'lib/lib/libstubs-output.so': driverEntry,
      'lib/lib/libstubs-elsewhere.so': `${driverEntry}:${other}`,
      'lib/lib/libnot-stubs.so': `/usr/local/cuda/lib64/stubs:/usr/local/cuda/lib/stubs:${other}`,
      'lib/lib/libempty-entry.so': `${other}::${driverEntry}`,
      'lib/lib/librpath.so': driverEntry,
    };
    for (const [file, runpath] of Object.entries(expected)) {
      expect(theirs[file]?.runpath, file).toBe(runpath);
      expect(compat[file]?.runpath, file).toBe(runpath);
    }
    expect(compat['lib/lib/librpath.so']?.kind).toBe('RUNPATH');
    expect(Object.values(compat).some(({ runpath }) => runpath?.includes(stubsDir) === true)).toBe(false);
    expect(Object.values(compat).some(({ runpath }) => runpath?.includes(compatEntry) === true)).toBe(false);
  });

  it("a cuda_compat hook installed with no cuda_compat (Nixpkgs off Jetson) does nothing, as Nixpkgs' does", async () => {
    const parent = packages().root;
    const installed = async (flavour: 'shims' | 'nixpkgs'): Promise<string> =>
      flavour === 'shims'
        ? installHook(parent, 'compat-hook-empty', HOOK_FILES.compat, {
            cudaCompat: '',
            cudaPatchelfFixup: `${HOOKS_DIR}/cuda-patchelf-fixup.sh`,
          })
        : installHook(parent, 'nixpkgs-compat-hook-empty', NIXPKGS_HOOK_FILES.compat, {
            cudaCompat: '',
            autoFixElfFiles: `${NIXPKGS_HOOKS_DIR}/auto-fix-elf-files.sh`,
          });
    const shimsHook = await installed('shims');
    const nixpkgsHook = await installed('nixpkgs');
    const { ours, compat, theirs } = await compare(
      { hooks: ['driver', shimsHook, 'stubs'], attrs: {} },
      { hooks: ['driver', nixpkgsHook, 'stubs'], attrs: {} },
    );
    expect(compat).toEqual(theirs);
    expect(dedupedRunpaths(ours)).toEqual(dedupedRunpaths(theirs));
    expect(theirs['lib/lib/libgreet.so']?.runpath).toBe(packages().driverEntry);
  });
});
