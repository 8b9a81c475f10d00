// separateDebugInfo: stdenv's fixup (fixtures/nix/setup.sh, as Nixpkgs' separate-debug-info.sh) moves the
// debug sections of every ELF file into $debug/lib/debug/.build-id/xx/yyyy.debug, files made by
// `objcopy --only-keep-debug` that keep the program headers, PT_DYNAMIC too, over a NOBITS .dynamic: no
// bytes behind it. The hooks then walk the debug output with the others, as Nixpkgs' autoFixElfFiles does.
// The build must succeed, leave the debug files byte for byte as objcopy wrote them (patchelf does, for
// Nixpkgs' hooks), and give every file the runpath Nixpkgs' hooks (restated in fixtures/nix/nixpkgs/) give
// it: in either source order and sourced twice.

import { describe, expect, it } from 'vitest';
import {
  VERSION,
  buildWithHooks,
  NOTE_DEBUG_FILES,
  debugFiles,
  dedupedRunpaths,
  elfSearchPaths,
  expectBuilt,
  expectDebugFilesUntouched,
  expectGreeting,
  usePackages,
  type Build,
  type BuildOptions,
  EVERY_HOOK,
} from './helpers/shim-stdenv.js';
import { readelfText } from './helpers/readelf.js';

const packages = usePackages();

async function build(options: BuildOptions): Promise<Build> {
  const done = await buildWithHooks(packages(), {
    ...options,
    attrs: { separateDebugInfo: '1', postFixup: NOTE_DEBUG_FILES, ...options.attrs },
  });
  expectBuilt(done);
  return done;
}

describe('separateDebugInfo', () => {
  it('writes debug files as Nixpkgs does: program headers with PT_DYNAMIC over a NOBITS .dynamic, and a debug link in each original', async () => {
    const done = await build({ hooks: [] });
    for (const file of (await debugFiles(done)).filter((path) => path.endsWith('.debug'))) {
      expect(file).toMatch(/\/lib\/debug\/\.build-id\/[0-9a-f]{2}\/[0-9a-f]{38}\.debug$/);
      expect(await readelfText(['-l'], file)).toMatch(/^\s*DYNAMIC\s/m);
      expect(await readelfText(['-S'], file)).toMatch(/\.dynamic\s+NOBITS\s/);
    }
    for (const file of [done.greet, done.libgreet]) {
      const sections = await readelfText(['-S'], file);
      expect(sections).toContain('.gnu_debuglink');
      expect(sections).not.toContain('.debug_info');
    }
  });

  it("succeeds with the hooks, leaves the debug files byte for byte, and gives every file the runpath Nixpkgs' hooks give", async () => {
    const theirs = await build({ hooks: EVERY_HOOK, flavour: 'nixpkgs' });
    await expectDebugFilesUntouched(theirs, 2);
    const expected = await elfSearchPaths(theirs);
    expect(
      Object.entries(expected)
        .filter(([file]) => file.startsWith('debug/'))
        .map(([, path]) => path),
    ).toEqual([
      { kind: 'none', runpath: null },
      { kind: 'none', runpath: null },
    ]);

    const variants: readonly BuildOptions[] = [
      { hooks: EVERY_HOOK },
      { hooks: ['stubs', 'compat', 'driver'] },
      { hooks: ['compat', 'stubs', 'driver'], buildInputs: EVERY_HOOK },
    ];
    for (const variant of variants) {
      for (const flags of ['', '--nixpkgs-compat']) {
        const ours = await build({ ...variant, attrs: { NIX_DEBUG: '1', cudaPatchelfFlags: flags } });
        const what = `${JSON.stringify(variant)} ${flags}`;
        // The debug output is walked with the others.
        expect(ours.calls[0]?.slice(-4), what).toEqual(['--', ours.out, ours.lib, ours.debug]);
        await expectDebugFilesUntouched(ours, 2);
        const paths = await elfSearchPaths(ours);
        if (flags === '') expect(dedupedRunpaths(paths), what).toEqual(dedupedRunpaths(expected));
        else expect(paths, what).toEqual(expected);
        await expectGreeting(ours, VERSION.compat, what);
      }
    }
  });
});
