// hooks/auto-patchelf.sh, the drop-in for Nixpkgs' autoPatchelfHook, in a builder that follows the stdenv
// hook protocol (fixtures/nix/setup.sh): with the driver, cuda_compat and stubs hooks, whatever order the
// four hook files are sourced in, one `cuda-patchelf apply` does all of them; each dependency's lib/
// (addEnvHooks), addAutoPatchelfSearchPath, runtimeDependencies, appendRunpaths, autoPatchelfFlags,
// autoPatchelfIgnoreMissingDeps (list, `true`, unset), dontAutoPatchelf and __structuredAttrs arrays
// reach it as Nixpkgs' hook passes them to auto-patchelf.py. The programs are compiled by the build with
// no runpath, and run with no loader variables: they load only through what the hooks wrote.

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { interpreterOf } from './helpers/readelf.js';
import { expectLoads, programBuild, runProgram, useResolverPackages } from './helpers/shim-auto-patchelf.js';
import {
  AUTO_PATCHELF_HOOK,
  EVERY_HOOK,
  VERSION,
  buildWithHooks,
  NOTE_DEBUG_FILES,
  expectBuilt,
  expectDebugFilesUntouched,
  expectGreeting,
  runpathOf,
  shellQuote,
  usePackages,
  type Build,
  type BuildOptions,
  type Input,
} from './helpers/shim-stdenv.js';
import { permutations, sha256File } from './helpers/tree-tools.js';

const packages = usePackages();
const resolver = useResolverPackages();
const DLOPENED = ['librtplugin.so', 'libappended.so'];

/** A build of the demo and $out/bin/usedep (linked against the dependency's libdep.so), with NIX_BINTOOLS. */
function build(options: BuildOptions): Promise<Build> {
  const r = resolver();
  return buildWithHooks(packages(), {
    buildInputs: [r.dep],
    ...options,
    extraBuild: [programBuild(r, 'usedep', ['dep']), options.extraBuild ?? ''].join('\n'),
    attrs: { NIX_BINTOOLS: r.bintools, ...options.attrs },
  });
}

/** The arguments of the build's one cuda-patchelf call, with the build's own directory written <build>. */
function normalisedCall(done: Build): string[] {
  expect(done.calls).toHaveLength(1);
  return (done.calls[0] ?? []).map((arg) => arg.replaceAll(done.dir, '<build>'));
}

/** The value after each occurrence of FLAG in the call. */
function valuesOf(done: Build, flag: string): string[] {
  const call = done.calls[0] ?? [];
  return call.flatMap((arg, index) => (arg === flag ? [call[index + 1] ?? ''] : []));
}

function usedep(done: Build): string {
  return join(done.out, 'bin', 'usedep');
}

describe('the autoPatchelf hook', () => {
  it('without it the program does not load: its library is in a dependency that no runpath names', async () => {
    const done = await build({ hooks: [] });
    expectBuilt(done);
    expect(await runpathOf(usedep(done))).toBeNull();
    const run = await runProgram(done, 'usedep');
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain('libdep.so: cannot open shared object file');
  });

  it("alone: finds each dependency's library, sets the bintools' interpreter, and the program runs (strictDeps or not)", async () => {
    const r = resolver();
    for (const strictDeps of ['', '1']) {
      const done = await build({ hooks: [AUTO_PATCHELF_HOOK], attrs: { strictDeps } });
      expectBuilt(done);
      const call = done.calls[0] ?? [];
      expect(call.slice(0, 4), strictDeps).toEqual(['apply', '--make-writable', '--auto-patchelf', '--interpreter']);
      expect(valuesOf(done, '--interpreter')).toEqual([r.interpreter]);
      expect(valuesOf(done, '--libc-dir')).toEqual([join(r.glibc, 'lib')]);
      expect(valuesOf(done, '--libs')).toEqual([join(r.dep, 'lib')]);
      // The driver hook is not sourced: cuda-patchelf is told so.
      expect(call).toContain('--no-driver');
      expect(call.slice(-3)).toEqual(['--', done.out, done.lib]);

      expect(await runpathOf(usedep(done))).toBe(join(r.dep, 'lib'));
      expect(await interpreterOf(usedep(done))).toBe(r.interpreter);
      expect(await interpreterOf(done.greet)).toBe(r.interpreter);
      // The program's own entry names the other output's libgreet.so, which the outputs' index finds there.
      expect(await runpathOf(done.greet)).toBe(`${done.lib}/lib`);
      expectLoads(await runProgram(done, 'usedep'), ['dep']);
      // Without the driver hook, libcuda.so.1 resolves through the index, which followed libgreet.so's
      // runpath to the stubs, as autoPatchelf does; the stubs hook is what takes them out.
      expect(await runpathOf(done.libgreet)).toBe(packages().stubsDir);
    }
  });

  it('under strictDeps, a library of nativeBuildInputs is for the build platform and is not searched: the build fails naming it', async () => {
    const r = resolver();
    const done = await build({ hooks: [AUTO_PATCHELF_HOOK, r.dep], buildInputs: [], attrs: { strictDeps: '1' } });
    expect(done.result.code).not.toBe(0);
    expect(valuesOf(done, '--libs')).toEqual([]);
    expect(done.result.stderr).toContain(`${usedep(done)}: library libdep.so not found`);
    // Without strictDeps every input counts, as in Nixpkgs.
    const loose = await build({ hooks: [AUTO_PATCHELF_HOOK, r.dep], buildInputs: [] });
    expectBuilt(loose);
    expectLoads(await runProgram(loose, 'usedep'), ['dep']);
  });

  it('with the driver, cuda_compat and stubs hooks, in all 24 orders: one apply, the same arguments, the same files', async () => {
    const { compatEntry, driverEntry } = packages();
    const r = resolver();
    const hooks: readonly Input[] = [AUTO_PATCHELF_HOOK, ...EVERY_HOOK];
    let first: { call: string[]; hashes: string[] } | undefined;
    for (const order of permutations(hooks)) {
      const what = order.map((hook) => (hook === AUTO_PATCHELF_HOOK ? 'auto-patchelf' : hook)).join(' ');
      const done = await build({ hooks: order });
      expectBuilt(done);
      const call = normalisedCall(done);
      expect(call, what).toContain('--auto-patchelf');
      expect(call, what).toContain('--remove-stubs');
      expect(await runpathOf(done.libgreet), what).toBe(`${compatEntry}:${driverEntry}`);
      expect(await runpathOf(done.greet), what).toBe(`${compatEntry}:${driverEntry}:${done.lib}/lib`);
      expect(await runpathOf(usedep(done)), what).toBe(`${compatEntry}:${driverEntry}:${r.dep}/lib`);
      expect(await interpreterOf(usedep(done)), what).toBe(r.interpreter);
      await expectGreeting(done, VERSION.compat, what);
      expectLoads(await runProgram(done, 'usedep'), ['dep']);
      // The build directories differ only in their names, of the same length: the same bytes elsewhere.
      const hashes = await Promise.all([done.libgreet].map(sha256File));
      first ??= { call, hashes };
      expect(call, what).toEqual(first.call);
      expect(hashes, what).toEqual(first.hashes);
    }
  }, 600_000);

  it('dontAutoPatchelf turns it off, also set in a phase after the hooks were sourced; the other hooks still run', async () => {
    const alone = await build({ hooks: [AUTO_PATCHELF_HOOK], attrs: { dontAutoPatchelf: '1' } });
    expectBuilt(alone);
    expect(alone.calls).toEqual([]);
    expect(alone.result.stderr).toContain('cuda-patchelf hook: the auto-patchelf hook is off: dontAutoPatchelf is set');
    expect(await runpathOf(usedep(alone))).toBeNull();

    const late = await build({ hooks: [AUTO_PATCHELF_HOOK, 'driver'], attrs: { preFixup: 'dontAutoPatchelf=1' } });
    expectBuilt(late);
    expect(late.calls[0]).not.toContain('--auto-patchelf');
    expect(late.calls[0]).not.toContain('--libs');
    expect(await runpathOf(usedep(late))).toBe(packages().driverEntry);
    expect((await runProgram(late, 'usedep')).stderr).toContain('libdep.so: cannot open shared object file');
  });

  it('autoPatchelf PATH, by hand with dontAutoPatchelf: the resolver alone over the trees or, with --no-recurse, the files named', async () => {
    const r = resolver();
    const { driverEntry } = packages();
    for (const [command, tail] of [
      ['addAutoPatchelfSearchPath "$lib"; autoPatchelf "$out"', (done: Build) => [done.out]],
      ['addAutoPatchelfSearchPath "$lib"; autoPatchelf --no-recurse "$out/bin"', (done: Build) => [done.greet, usedep(done)]],
    ] as const) {
      const done = await build({
        hooks: [AUTO_PATCHELF_HOOK, 'driver'],
        attrs: { dontAutoPatchelf: '1', postFixup: command },
      });
      expectBuilt(done);
      // The derivation's postFixup runs before the hooks' entry, which does the driver hook alone.
      expect(done.calls, command).toHaveLength(2);
      const [byHand, hooks] = done.calls as [string[], string[]];
      expect(byHand.slice(0, 4), command).toEqual(['apply', '--make-writable', '--no-driver', '--auto-patchelf']);
      expect(byHand.slice(byHand.indexOf('--') + 1), command).toEqual(tail(done));
      expect(hooks, command).not.toContain('--auto-patchelf');
      expect(await runpathOf(usedep(done)), command).toBe(`${driverEntry}:${r.dep}/lib`);
      expectLoads(await runProgram(done, 'usedep'), ['dep']);
      // bin/greet's libgreet.so is found in the lib output, given as a search path, which is not patched
      // by hand: only the driver hook went there.
      expect(await runpathOf(done.greet), command).toBe(`${driverEntry}:${done.lib}/lib`);
      expect(await runpathOf(done.libgreet), command).toBe(`${driverEntry}:${packages().stubsDir}`);
    }
  });

  it('a library found nowhere fails the build, naming it; autoPatchelfIgnoreMissingDeps as a list, or true (deprecated), lets it pass', async () => {
    const r = resolver();
    const withMissing = { hooks: [AUTO_PATCHELF_HOOK], extraBuild: programBuild(r, 'usemissing', ['dep', 'missing']) };
    const usemissing = (done: Build): string => join(done.out, 'bin', 'usemissing');

    const failed = await build(withMissing);
    expect(failed.result.code).not.toBe(0);
    expect(failed.result.stderr).toContain(`cuda-patchelf: ${usemissing(failed)}: library libmissing.so not found`);
    expect(failed.result.stderr).toContain('cuda-patchelf hook: error: cuda-patchelf apply failed with exit code 3');
    expect(failed.result.stderr).toContain('or name it in autoPatchelfIgnoreMissingDeps');
    expect(valuesOf(failed, '--ignore-missing')).toEqual([]);

    const deprecation =
      "cuda-patchelf hook: warning: setting 'autoPatchelfIgnoreMissingDeps = true;' is deprecated and will be removed" +
      ` in a future release. Use 'autoPatchelfIgnoreMissingDeps = [ "*" ];' instead.`;
    const cases = [
      { value: 'libother.so libmiss*.so', patterns: ['libother.so', 'libmiss*.so'], deprecated: false },
      { value: '1', patterns: ['*'], deprecated: true },
      { value: 'true', patterns: ['*'], deprecated: true },
    ];
    for (const { value, patterns, deprecated } of cases) {
      const done = await build({ ...withMissing, attrs: { autoPatchelfIgnoreMissingDeps: value } });
      expectBuilt(done);
      expect(valuesOf(done, '--ignore-missing'), value).toEqual(patterns);
      expect(done.result.stderr, value).toContain(`${usemissing(done)}: library libmissing.so not found (--ignore-missing)`);
      expect(done.result.stderr.includes(deprecation), value).toBe(deprecated);
      // The file is patched with what resolved, as autoPatchelf does.
      expect(await runpathOf(usemissing(done)), value).toBe(join(r.dep, 'lib'));
      expectLoads(await runProgram(done, 'usedep'), ['dep']);
    }
  });

  it('runtimeDependencies first and appendRunpaths last, in programs only and in every file; addAutoPatchelfSearchPath finds a library', async () => {
    const r = resolver();
    const done = await build({
      hooks: [AUTO_PATCHELF_HOOK],
      extraBuild: [programBuild(r, 'usesearch', ['dep', 'search']), `addAutoPatchelfSearchPath ${shellQuote(r.search)}`].join('\n'),
      attrs: { runtimeDependencies: r.runtime, appendRunpaths: r.appended },
    });
    expectBuilt(done);
    expect(valuesOf(done, '--runtime-dependencies')).toEqual([join(r.runtime, 'lib')]);
    expect(valuesOf(done, '--append-rpaths')).toEqual([r.appended]);
    expect(valuesOf(done, '--libs')).toEqual([join(r.dep, 'lib'), join(r.search, 'nested', 'sub')]);
    const usesearch = join(done.out, 'bin', 'usesearch');
    expect(await runpathOf(usesearch)).toBe(`${r.runtime}/lib:${r.dep}/lib:${r.search}/nested/sub:${r.appended}`);
    expectLoads(await runProgram(done, 'usesearch', DLOPENED), ['dep', 'search'], DLOPENED);
    expectLoads(await runProgram(done, 'usedep', DLOPENED), ['dep'], DLOPENED);
    // A library has no interpreter: no runtime dependency, and the appended directory after its own.
    expect(await runpathOf(done.libgreet)).toBe(`${packages().stubsDir}:${r.appended}`);

    // --no-recurse looks in the directories named, not below them: there libsearch.so is not found.
    const shallow = await build({
      hooks: [AUTO_PATCHELF_HOOK],
      extraBuild: [programBuild(r, 'usesearch', ['dep', 'search']), `addAutoPatchelfSearchPath --no-recurse ${shellQuote(r.search)}`].join(
        '\n',
      ),
    });
    expect(shallow.result.code).not.toBe(0);
    expect(shallow.result.stderr).toContain('library libsearch.so not found');
  });

  it('__structuredAttrs: the lists are arrays, an element with a space in it is one directory, autoPatchelfFlags reach cuda-patchelf', async () => {
    const r = resolver();
    const attrsFile = join(r.root, 'attrs.sh');
    const array = (values: readonly string[]): string => `(${values.map(shellQuote).join(' ')})`;
    await writeFile(
      attrsFile,
      [
        '__structuredAttrs=1',
        `declare -a runtimeDependencies=${array([r.runtimeWithSpace])}`,
        `declare -a appendRunpaths=${array([r.appended])}`,
        `declare -a autoPatchelfIgnoreMissingDeps=${array(['libmissing.so'])}`,
        `declare -a autoPatchelfFlags=${array(['--keep-libc', '--preserve-origin'])}`,
        '',
      ].join('\n'),
    );
    const done = await build({
      hooks: [AUTO_PATCHELF_HOOK],
      extraBuild: programBuild(r, 'usemissing', ['dep', 'missing']),
      attrs: { NIX_ATTRS_SH_FILE: attrsFile },
    });
    expectBuilt(done);
    expect(valuesOf(done, '--runtime-dependencies')).toEqual([join(r.runtimeWithSpace, 'lib')]);
    expect(valuesOf(done, '--ignore-missing')).toEqual(['libmissing.so']);
    expect(done.calls[0]).toContain('--keep-libc');
    // Nixpkgs' --preserve-origin is what cuda-patchelf does anyway; it is no flag of its own.
    expect(done.calls[0]).not.toContain('--preserve-origin');
    expect(await runpathOf(usedep(done))).toBe(`${r.runtimeWithSpace}/lib:${r.dep}/lib:${r.appended}`);
    expectLoads(await runProgram(done, 'usedep', DLOPENED), ['dep'], DLOPENED);
  });

  it('separateDebugInfo: the debug output is left alone (debug files byte for byte), and nothing resolves into it', async () => {
    const { compatEntry, driverEntry } = packages();
    const r = resolver();
    const done = await build({
      hooks: [...EVERY_HOOK, AUTO_PATCHELF_HOOK],
      attrs: { separateDebugInfo: '1', postFixup: NOTE_DEBUG_FILES },
    });
    expectBuilt(done);
    expect(done.calls[0]?.slice(-4)).toEqual(['--', done.out, done.lib, done.debug]);
    // bin/greet, lib/libgreet.so and bin/usedep each have theirs.
    await expectDebugFilesUntouched(done, 3);
    expect(await runpathOf(done.greet)).toBe(`${compatEntry}:${driverEntry}:${done.lib}/lib`);
    expect(await runpathOf(usedep(done))).toBe(`${compatEntry}:${driverEntry}:${r.dep}/lib`);
    expectLoads(await runProgram(done, 'usedep'), ['dep']);
    await expectGreeting(done, VERSION.compat);
  });
});
