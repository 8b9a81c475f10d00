// The setup hooks of hooks/ in a builder that follows the stdenv hook protocol (fixtures/nix/setup.sh):
// whatever order the hook files are sourced in, and however often, one `cuda-patchelf apply` runs over
// every output at fixup, after the derivation's own postFixup and the hooks registered before it, and
// leaves cuda_compat's directory before the driver's: the program then loads cuda_compat's libcuda.so.1.

import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { requireTool } from './helpers/fixtures.js';
import {
  HOOKS_DIR,
  STUB_REPORT,
  VERSION,
  buildWithHooks,
  expectBuilt,
  expectGreeting,
  greetReport,
  runGreet,
  runpathOf,
  usePackages,
  type Build,
} from './helpers/shim-stdenv.js';
import { sha256File } from './helpers/tree-tools.js';

const packages = usePackages();

/** compat, then driver, then what the file had without the stubs entry; the program loads compat's libcuda. */
async function expectCompatFirst(build: Build): Promise<void> {
  const { compatEntry, driverEntry } = packages();
  expectBuilt(build);
  expect(await runpathOf(build.libgreet)).toBe(`${compatEntry}:${driverEntry}`);
  expect(await runpathOf(build.greet)).toBe(`${compatEntry}:${driverEntry}:${build.lib}/lib`);
  const run = await runGreet(build);
  expect(run.stdout).toBe(greetReport(VERSION.compat));
  expect(run.code).toBe(0);
}

describe('hook order', () => {
  it('without the hooks the program loads the link-time stub (what the hooks must change)', async () => {
    const build = await buildWithHooks(packages(), { hooks: [] });
    expectBuilt(build);
    expect(build.calls).toEqual([]);
    expect(await runpathOf(build.libgreet)).toBe(packages().stubsDir);
    const run = await runGreet(build);
    expect(run.stdout).toBe(STUB_REPORT);
    expect(run.code).toBe(1);
  });

  it('puts cuda_compat before the driver whichever hook file is sourced first, with one call over both outputs', async () => {
    const driverFirst = await buildWithHooks(packages(), { hooks: ['driver', 'compat', 'stubs'] });
    const compatFirst = await buildWithHooks(packages(), { hooks: ['stubs', 'compat', 'driver'] });
    for (const build of [driverFirst, compatFirst]) {
      await expectCompatFirst(build);
      expect(build.calls).toHaveLength(1);
      expect(build.calls[0]?.slice(-3)).toEqual(['--', build.out, build.lib]);
    }
    // The library's old runpath held only the stubs, so both builds must give the very same bytes.
    expect(await sha256File(compatFirst.libgreet)).toBe(await sha256File(driverFirst.libgreet));
  });

  it('sourced again from other input lists (stdenv sources a package once per list), a hook still registers one postFixupHooks entry and one call', async () => {
    const build = await buildWithHooks(packages(), {
      depsBuildBuild: ['stubs', 'driver'],
      hooks: ['compat', 'driver', 'stubs'],
      buildInputs: ['driver', 'compat', 'stubs', join(HOOKS_DIR, 'cuda-patchelf-fixup.sh')],
      attrs: { preFixup: 'declare -p postFixupHooks >&2' },
    });
    await expectCompatFirst(build);
    expect(build.calls).toHaveLength(1);
    expect(build.result.stderr).toContain('declare -a postFixupHooks=([0]="cudaPatchelfFixup")');
  });

  it("runs after the derivation's own postFixup and the hooks registered before it, and before those registered after it", async () => {
    const { compatEntry, driverEntry } = packages();
    const before = await buildWithHooks(packages(), { hooks: [] });
    const seen = join(before.dir, 'seen-by-later-hook');
    const order = join(before.dir, 'order');
    const earlierHook = join(before.dir, 'earlier-hook.sh');
    const laterHook = join(before.dir, 'later-hook.sh');
    const patchelf = requireTool('patchelf');
    await writeFile(earlierHook, `postFixupHooks+=('echo earlier >> ${order}')\n`);
    await writeFile(laterHook, `postFixupHooks+=('echo later >> ${order}; ${patchelf} --print-rpath "$lib/lib/libgreet.so" > ${seen}')\n`);
    const build = await buildWithHooks(packages(), {
      hooks: [earlierHook, 'driver', 'compat', 'stubs', laterHook],
      attrs: { postFixup: `echo postFixup >> ${order}; ${patchelf} --add-rpath /from-postFixup "$lib/lib/libgreet.so"` },
    });
    expectBuilt(build);
    expect(await readFile(order, 'utf8')).toBe('postFixup\nearlier\nlater\n');
    // The entry postFixup added survives, behind the hooks' entries, and the later hook saw the result.
    expect(await runpathOf(build.libgreet)).toBe(`${compatEntry}:${driverEntry}:/from-postFixup`);
    expect(await readFile(seen, 'utf8')).toBe(`${compatEntry}:${driverEntry}:/from-postFixup\n`);
  });

  it('takes every output named in $outputs and passes over one that was not created', async () => {
    const build = await buildWithHooks(packages(), {
      hooks: ['driver'],
      attrs: { outputs: 'out dev lib', dev: '/nonexistent/cuda-patchelf-dev-output' },
    });
    expectBuilt(build);
    expect(build.calls).toHaveLength(1);
    expect(build.calls[0]?.slice(-3)).toEqual(['--', build.out, build.lib]);
    expect(await runpathOf(build.greet)).toBe(`${packages().driverEntry}:${build.lib}/lib`);
    expect(await runpathOf(build.libgreet)).toBe(`${packages().driverEntry}:${packages().stubsDir}`);
    await expectGreeting(build, VERSION.driver);
  });
});
