// Source order and sourcing twice, against Nixpkgs' hooks restated in fixtures/nix/nixpkgs/ (real
// patchelf, same builder, same demo). Nixpkgs' result depends on both: each hook file adds its own
// postFixupHooks entry where it is sourced (the driver and cuda_compat hooks once more for each sourcing),
// so only an order that sources the driver hook first gives cuda_compat's directory before the driver's
// and no repeated entry. The hooks of hooks/ give that one result, Nixpkgs' in the order it needs (driver,
// cuda_compat, stubs, sourced once), whatever the order and however often they are sourced: byte for byte
// with --nixpkgs-compat.

import { describe, expect, it } from 'vitest';
import {
  buildWithHooks,
  elfSearchPaths,
  expectBuilt,
  usePackages,
  type BuildOptions,
  type HookName,
  type SearchPath,
  EVERY_HOOK,
} from './helpers/shim-stdenv.js';
import { permutations } from './helpers/tree-tools.js';

const packages = usePackages();
const COMPAT = { cudaPatchelfFlags: '--nixpkgs-compat' };

async function searchPaths(options: BuildOptions): Promise<Record<string, SearchPath>> {
  const build = await buildWithHooks(packages(), options);
  expectBuilt(build);
  return elfSearchPaths(build);
}

describe("source order and sourcing twice, against Nixpkgs' hooks", () => {
  it('gives, in every source order, what Nixpkgs gives only when the driver hook is sourced first', async () => {
    const { compatEntry, driverEntry } = packages();
    const nixpkgs = await searchPaths({ hooks: EVERY_HOOK, flavour: 'nixpkgs' });
    expect(nixpkgs['lib/lib/libgreet.so']?.runpath).toBe(`${compatEntry}:${driverEntry}`);
    const nixpkgsRight: string[] = [];
    for (const order of permutations<HookName>(EVERY_HOOK)) {
      expect(await searchPaths({ hooks: order, attrs: COMPAT }), order.join(' ')).toEqual(nixpkgs);
      if (JSON.stringify(await searchPaths({ hooks: order, flavour: 'nixpkgs' })) === JSON.stringify(nixpkgs))
        nixpkgsRight.push(order.join(' '));
    }
    expect(nixpkgsRight).toEqual(['driver compat stubs', 'driver stubs compat']);
  });

  it('what Nixpkgs gives in the wrong orders: the driver before cuda_compat, or the driver directory twice', async () => {
    const { compatEntry, driverEntry } = packages();
    const libgreet = async (hooks: readonly HookName[]): Promise<string | null | undefined> =>
      (await searchPaths({ hooks, flavour: 'nixpkgs' }))['lib/lib/libgreet.so']?.runpath;
    expect(await libgreet(['compat', 'driver', 'stubs'])).toBe(`${driverEntry}:${compatEntry}`);
    expect(await libgreet(['stubs', 'driver', 'compat'])).toBe(`${compatEntry}:${driverEntry}:${driverEntry}`);
  });

  it('sourced twice (from nativeBuildInputs and from buildInputs, or depsBuildBuild), gives what Nixpkgs gives sourced once', async () => {
    const { compatEntry, driverEntry } = packages();
    const once = await searchPaths({ hooks: EVERY_HOOK, flavour: 'nixpkgs' });
    const twice: readonly BuildOptions[] = [
      { hooks: EVERY_HOOK, buildInputs: EVERY_HOOK },
      { hooks: ['stubs', 'compat', 'driver'], buildInputs: ['compat', 'driver', 'stubs'] },
      { depsBuildBuild: EVERY_HOOK, hooks: ['compat', 'stubs', 'driver'] },
    ];
    for (const options of twice) {
      expect(await searchPaths({ ...options, attrs: COMPAT }), JSON.stringify(options)).toEqual(once);
    }
    // Nixpkgs' driver and cuda_compat hooks add their entry each time they are sourced (the stubs hook once).
    const nixpkgsTwice = await searchPaths({ hooks: EVERY_HOOK, buildInputs: EVERY_HOOK, flavour: 'nixpkgs' });
    expect(nixpkgsTwice['lib/lib/libgreet.so']?.runpath).toBe(`${compatEntry}:${driverEntry}:${compatEntry}:${driverEntry}`);
  });
});
