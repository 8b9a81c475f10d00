// What turns the hooks of hooks/ on, off and where they take their paths from, in a builder that follows
// the stdenv hook protocol: each dontUse… switch (also set after the hooks were sourced, and the deprecated
// dontUseAutoAddOpenGLRunpath), the @placeholder@ filled at install time as makeSetupHook does (it wins over
// the environment), the environment variables, the default driver link, cudaPatchelfFlags as a string and
// as an array, CUDA_PATCHELF, NIX_BUILD_CORES, NIX_DEBUG, and stdenv's nixLog.

import { readFile, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  HOOK_FILES,
  HOOKS_DIR,
  VERSION,
  buildWithHooks,
  expectBuilt,
  expectGreeting,
  runpathOf,
  usePackages,
  EVERY_HOOK,
} from './helpers/shim-stdenv.js';
import { sha256File } from './helpers/tree-tools.js';

const packages = usePackages();

describe('switches', () => {
  it('dontUseAutoAddDriverRunpath leaves the driver hook out: cuda_compat first, and the stubs entry becomes the driver directory', async () => {
    const { compatEntry, driverEntry, driverLink } = packages();
    const build = await buildWithHooks(packages(), { hooks: EVERY_HOOK, attrs: { dontUseAutoAddDriverRunpath: '1' } });
    expectBuilt(build);
    expect(build.calls[0]).toContain('--no-driver');
    // Nixpkgs' stubs hook puts the driver directory in place of the stubs entry even with the driver hook off.
    expect(build.calls[0]).toEqual(expect.arrayContaining(['--remove-stubs', '--driver-link', driverLink]));
    expect(await runpathOf(build.libgreet)).toBe(`${compatEntry}:${driverEntry}`);
    expect(await runpathOf(build.greet)).toBe(`${compatEntry}:${build.lib}/lib`);
    await expectGreeting(build, VERSION.compat);
    expect(build.result.stderr).toContain('cuda-patchelf hook: the driver hook is off: dontUseAutoAddDriverRunpath is set');
  });

  it('the deprecated dontUseAutoAddOpenGLRunpath turns the driver hook off too, and says once that it is deprecated', async () => {
    const { compatEntry, driverEntry } = packages();
    const build = await buildWithHooks(packages(), { hooks: EVERY_HOOK, attrs: { dontUseAutoAddOpenGLRunpath: '1' } });
    expectBuilt(build);
    expect(build.calls[0]).toContain('--no-driver');
    expect(await runpathOf(build.libgreet)).toBe(`${compatEntry}:${driverEntry}`);
    expect(await runpathOf(build.greet)).toBe(`${compatEntry}:${build.lib}/lib`);
    const deprecation =
      'cuda-patchelf hook: dontUseAutoAddOpenGLRunpath has been deprecated, please use dontUseAutoAddDriverRunpath instead';
    expect(build.result.stderr.split(deprecation)).toHaveLength(2);
    expect(build.result.stderr).toContain('cuda-patchelf hook: the driver hook is off: dontUseAutoAddOpenGLRunpath is set');
    // Set only after the hooks were sourced, it still counts, and still says so.
    const late = await buildWithHooks(packages(), { hooks: ['driver'], attrs: { preFixup: 'dontUseAutoAddOpenGLRunpath=1' } });
    expectBuilt(late);
    expect(await runpathOf(late.libgreet)).toBe(packages().stubsDir);
    expect(late.result.stderr.split(deprecation)).toHaveLength(2);
    // Without the driver hook there is nothing for it to deprecate.
    const noDriverHook = await buildWithHooks(packages(), { hooks: ['compat'], attrs: { dontUseAutoAddOpenGLRunpath: '1' } });
    expectBuilt(noDriverHook);
    expect(noDriverHook.result.stderr).not.toContain('deprecated');
  });

  it("with the driver hook on, the driver hook's driver link replaces the stubs entries, and a different one of the stubs hook is said", async () => {
    const { driverLink, driverEntry } = packages();
    const build0 = await buildWithHooks(packages(), { hooks: [] });
    const stubsHook = join(build0.dir, 'stubs-setup-hook');
    const text = (await readFile(HOOK_FILES.stubs, 'utf8'))
      .replaceAll('@driverLink@', '/elsewhere/opengl-driver')
      .replaceAll('@cudaPatchelfFixup@', join(HOOKS_DIR, 'cuda-patchelf-fixup.sh'));
    await writeFile(stubsHook, text);
    const build = await buildWithHooks(packages(), { hooks: ['driver', stubsHook] });
    expectBuilt(build);
    expect(build.calls[0]?.filter((arg) => arg === '--driver-link')).toHaveLength(1);
    expect(await runpathOf(build.libgreet)).toBe(driverEntry);
    expect(build.result.stderr).toContain(
      `cuda-patchelf hook: warning: the driver hook's driver link (${driverLink}) replaces the stubs entries, not the stubs hook's (/elsewhere/opengl-driver)`,
    );
  });

  it('dontUseAutoAddCudaCompatRunpath leaves cuda_compat out: the program loads the driver', async () => {
    const build = await buildWithHooks(packages(), { hooks: EVERY_HOOK, attrs: { dontUseAutoAddCudaCompatRunpath: '1' } });
    expectBuilt(build);
    expect(build.calls[0]).not.toContain('--cuda-compat');
    expect(await runpathOf(build.libgreet)).toBe(packages().driverEntry);
    await expectGreeting(build, VERSION.driver);
  });

  it('dontUseRemoveStubsFromRunpath keeps the stubs entry (behind the others)', async () => {
    const { compatEntry, driverEntry, stubsDir } = packages();
    const build = await buildWithHooks(packages(), { hooks: EVERY_HOOK, attrs: { dontUseRemoveStubsFromRunpath: '1' } });
    expectBuilt(build);
    expect(await runpathOf(build.libgreet)).toBe(`${compatEntry}:${driverEntry}:${stubsDir}`);
    await expectGreeting(build, VERSION.compat);
  });

  it('with every hook off nothing runs and nothing changes, even without a cuda-patchelf to run', async () => {
    const reference = await buildWithHooks(packages(), { hooks: [] });
    const build = await buildWithHooks(packages(), {
      hooks: EVERY_HOOK,
      cli: 'none',
      attrs: { dontUseAutoAddDriverRunpath: '1', dontUseAutoAddCudaCompatRunpath: '1', dontUseRemoveStubsFromRunpath: '1' },
    });
    expectBuilt(build);
    expect(build.calls).toEqual([]);
    expect(build.result.stderr).toContain('every hook is off: nothing to do');
    expect(await sha256File(build.libgreet)).toBe(await sha256File(reference.libgreet));
    await expectGreeting(build, 'stub');
  });

  it('reads the switches at fixup time: one set by an earlier phase counts', async () => {
    const build = await buildWithHooks(packages(), { hooks: EVERY_HOOK, attrs: { preFixup: 'dontUseAutoAddCudaCompatRunpath=1' } });
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
    await expectGreeting(build, VERSION.compat);
  });

  it('takes the paths from the environment when nothing was filled in, and /run/opengl-driver when not even that', async () => {
    const fromEnv = await buildWithHooks(packages(), { hooks: ['driver', 'compat'] });
    expectBuilt(fromEnv);
    expect(fromEnv.calls[0]).toEqual(
      expect.arrayContaining(['--driver-link', packages().driverLink, '--cuda-compat', packages().cudaCompat]),
    );
    const byDefault = await buildWithHooks(packages(), { hooks: ['driver'], envPaths: false });
    expectBuilt(byDefault);
    expect(await runpathOf(byDefault.libgreet)).toBe(`/run/opengl-driver/lib:${packages().stubsDir}`);
  });

  it('passes cudaPatchelfFlags to cuda-patchelf apply, as a string or (structured attributes) as an array', async () => {
    const reference = await buildWithHooks(packages(), { hooks: [] });
    const asString = await buildWithHooks(packages(), { hooks: EVERY_HOOK, attrs: { cudaPatchelfFlags: '--dry-run --jobs 1' } });
    const asArray = await buildWithHooks(packages(), {
      hooks: EVERY_HOOK,
      attrs: { preFixup: "cudaPatchelfFlags=(--dry-run --stubs-pattern '/lib/stubs')" },
    });
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
    // The driver hook twice: from nativeBuildInputs and from buildInputs (stdenv sources a package once per list).
    const hooks = ['driver', 'compat'];
    const quiet = await buildWithHooks(packages(), { hooks, buildInputs: ['driver'] });
    const debug = await buildWithHooks(packages(), { hooks, buildInputs: ['driver'], attrs: { NIX_DEBUG: '1' } });
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
    // One line per file patched, as Nixpkgs' autoFixElfFiles names each file at NIX_DEBUG >= 1: cuda-patchelf's --verbose.
    expect(debug.calls[0]).toContain('--verbose');
    expect(quiet.calls[0]).not.toContain('--verbose');
    for (const [build, shown] of [
      [debug, true],
      [quiet, false],
    ] as const) {
      const said = `${build.result.stdout}${build.result.stderr}`;
      // Every line naming the file but stdenv's own (patchelf's shrink-rpath hook names each file too).
      const ours = said.split('\n').filter((line) => !line.startsWith('shrinking '));
      for (const file of [build.greet, build.libgreet]) {
        expect(
          ours.filter((line) => line.includes(file)),
          `${file} in\n${said}`,
        ).toHaveLength(shown ? 1 : 0);
      }
    }
  });

  it('patches with half of NIX_BUILD_CORES threads (at least 1), and leaves the number to cuda-patchelf when it is 0 (every core)', async () => {
    const jobs = async (attrs: Record<string, string>): Promise<string | undefined> => {
      const build = await buildWithHooks(packages(), { hooks: ['driver'], attrs });
      expectBuilt(build);
      const args = build.calls[0] ?? [];
      const at = args.indexOf('--jobs');
      return at < 0 ? undefined : args[at + 1];
    };
    expect(await jobs({ NIX_BUILD_CORES: '4' })).toBe('2');
    expect(await jobs({ NIX_BUILD_CORES: '3' })).toBe('1');
    // stdenv's setup.sh makes an unset NIX_BUILD_CORES 1, and 0 the number of cores, before any phase.
    expect(await jobs({})).toBe('1');
    expect(await jobs({ NIX_BUILD_CORES: '0' })).toBe(String(Math.max(1, Math.floor(availableParallelism() / 2))));
    // A 0 that reaches the hook (a builder that does not normalise it) passes no --jobs at all.
    expect(await jobs({ preFixup: 'NIX_BUILD_CORES=0' })).toBeUndefined();
    // cudaPatchelfFlags come after, so that a derivation's own --jobs wins.
    const own = await buildWithHooks(packages(), { hooks: ['driver'], attrs: { NIX_BUILD_CORES: '4', cudaPatchelfFlags: '--jobs 1' } });
    expectBuilt(own);
    expect(own.calls[0]?.join(' ')).toContain('--jobs 2 --jobs 1 --');
  });

  it("writes through stdenv's nixLog and nixErrorLog to NIX_LOG_FD, and to stderr where there is no log to write to", async () => {
    const logged = await buildWithHooks(packages(), { hooks: ['driver'] });
    const plain = await buildWithHooks(packages(), { hooks: ['driver'], nixLogFd: false });
    expectBuilt(logged);
    expectBuilt(plain);
    expect(logged.result.stderr).toContain(`cudaPatchelfLog: cuda-patchelf hook: sourcing the driver hook (${packages().driverLink})\n`);
    expect(plain.result.stderr.split('\n')).toContain(`cuda-patchelf hook: sourcing the driver hook (${packages().driverLink})`);
    expect(plain.result.stderr).not.toContain('cudaPatchelfLog:');
    const failed = await buildWithHooks(packages(), { hooks: ['driver'], cli: 'none' });
    expect(failed.result.code).toBe(127);
    expect(failed.result.stderr).toContain('ERROR: cudaPatchelfErrorLog: cuda-patchelf hook: error: cuda-patchelf is not on PATH');
  });
});
