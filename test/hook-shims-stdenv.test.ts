// The builder the shim tests run the hooks in, fixtures/nix/setup.sh, follows the protocol of Nixpkgs'
// pkgs/stdenv/generic/setup.sh where setup hooks can tell: which offsets a hook sees from each input list
// and propagated input, in which order the hooks are sourced, each package once per list; the fixup phase
// (fixupOutput hooks per output with $prefix, stdenv's strip and patchelf --shrink-rpath among them, before
// the derivation's postFixup and then postFixupHooks); runHook's calling conventions; the nixLog family's
// levels and NIX_LOG_FD; NIX_BUILD_CORES. Probe hooks write what they see to a log.

import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildWithHooks, expectBuilt, runpathOf, shellQuote, usePackages, type Build, type BuildOptions } from './helpers/shim-stdenv.js';
import { readelfText } from './helpers/readelf.js';

const packages = usePackages();

interface Probe {
  readonly dir: string;
  readonly log: string;
  /** A setup hook file that runs CODE when sourced. */
  hook(name: string, code: string): Promise<string>;
  /** A package directory: nix-support/setup-hook running CODE, and nix-support files (propagated inputs). */
  pkg(name: string, code: string, files?: Readonly<Record<string, string>>): Promise<string>;
  lines(): Promise<string[]>;
}

async function probe(): Promise<Probe> {
  const dir = await mkdtemp(join(packages().root, 'probe-'));
  const log = join(dir, 'log');
  await writeFile(log, '');
  return {
    dir,
    log,
    hook: async (name, code) => {
      const file = join(dir, `${name}.sh`);
      await writeFile(file, `${code}\n`);
      return file;
    },
    pkg: async (name, code, files = {}) => {
      const pkg = join(dir, name);
      await mkdir(join(pkg, 'nix-support'), { recursive: true });
      await writeFile(join(pkg, 'nix-support', 'setup-hook'), `${code}\n`);
      for (const [file, text] of Object.entries(files)) await writeFile(join(pkg, 'nix-support', file), text);
      return pkg;
    },
    lines: async () => (await readFile(log, 'utf8')).split('\n').filter((line) => line.length > 0),
  };
}

/** Setup-hook code that logs NAME and the offsets it was sourced with. */
function sees(p: Probe, name: string): string {
  return `echo "${name} $hostOffset $targetOffset" >> ${shellQuote(p.log)}`;
}

async function built(options: BuildOptions): Promise<Build> {
  const build = await buildWithHooks(packages(), options);
  expectBuilt(build);
  return build;
}

describe('the stand-in for stdenv follows its protocol', () => {
  it('sources each input once per list, with the offsets of its list, depsBuildBuild first, then nativeBuildInputs, then buildInputs', async () => {
    const p = await probe();
    const [a, b, c] = await Promise.all(['a', 'b', 'c'].map((name) => p.hook(name, sees(p, name))));
    await built({ buildInputs: [c as string], hooks: [b as string, b as string, a as string], depsBuildBuild: [a as string] });
    expect(await p.lines()).toEqual(['a -1 -1', 'b -1 0', 'a -1 0', 'c 0 1']);
  });

  it('follows propagated inputs, at the offsets their propagating input maps them to', async () => {
    const p = await probe();
    const host = await p.pkg('host', sees(p, 'host'));
    const build = await p.pkg('build', sees(p, 'build'));
    // A host input propagating a host input (0, 1) and a build input (-1, 0).
    const parent = await p.pkg('parent', sees(p, 'parent'), {
      'propagated-build-inputs': `${host}\n`,
      'propagated-native-build-inputs': `${build}\n`,
    });
    await built({ hooks: [], buildInputs: [parent] });
    expect(await p.lines()).toEqual(['build -1 0', 'parent 0 1', 'host 0 1']);
  });

  it('runs the fixup phase in order: preFixup, fixupOutput per output with $prefix, postFixup, postFixupHooks', async () => {
    const p = await probe();
    const log = shellQuote(p.log);
    const hook = await p.hook(
      'fixup',
      `fixupOutputHooks+=('echo "fixupOutput \${prefix#$out}" >> ${log}'); postFixupHooks+=('echo postFixupHooks >> ${log}')`,
    );
    const build = await built({ hooks: [hook], attrs: { preFixup: `echo preFixup >> ${log}`, postFixup: `echo postFixup >> ${log}` } });
    const relative = (await p.lines()).map((line) => line.replace(build.dir, '<build>'));
    expect(relative).toEqual(['preFixup', 'fixupOutput ', `fixupOutput <build>/lib`, 'postFixup', 'postFixupHooks']);
  });

  it('shrinks runpaths (patchelf --shrink-rpath) in fixupOutput, before postFixup, unless dontPatchELF', async () => {
    const extra = `${packages().driverEntry}`;
    const seen = (p: Probe): string => `patchelf --print-rpath "$lib/lib/libgreet.so" >> ${shellQuote(p.log)}`;
    const add = `patchelf --set-rpath "$(patchelf --print-rpath "$lib/lib/libgreet.so"):${extra}" "$lib/lib/libgreet.so"`;
    const shrunk = await probe();
    await built({ hooks: [], attrs: { preFixup: add, postFixup: seen(shrunk) } });
    expect(await shrunk.lines()).toEqual([packages().stubsDir]);
    const kept = await probe();
    const build = await built({ hooks: [], attrs: { preFixup: add, postFixup: seen(kept), dontPatchELF: '1' } });
    expect(await kept.lines()).toEqual([`${packages().stubsDir}:${extra}`]);
    expect(await runpathOf(build.libgreet)).toBe(`${packages().stubsDir}:${extra}`);
  });

  it('strips debug sections (strip -S) in fixupOutput, unless dontStrip', async () => {
    const sections = (build: Build): Promise<string> => readelfText(['-S'], build.libgreet);
    expect(await sections(await built({ hooks: [], attrs: { NIX_CFLAGS_COMPILE: '-g' } }))).not.toContain('.debug_info');
    expect(await sections(await built({ hooks: [], attrs: { NIX_CFLAGS_COMPILE: '-g', dontStrip: '1' } }))).toContain('.debug_info');
  });

  it("runHook: the derivation's own hook (a function over a string), then each entry, a function with runHook's arguments, else code", async () => {
    const p = await probe();
    const log = shellQuote(p.log);
    const hook = await p.hook(
      'run-hook',
      `probeFn() { echo "fn $*" >> ${log}; }; probeHooks+=(probeFn 'echo code >> ${log}'); preFixup() { echo "own function" >> ${log}; runHook probeHook one two; }`,
    );
    await built({ hooks: [hook], attrs: { preFixup: `echo "own string" >> ${log}`, probeHook: `echo "own probeHook" >> ${log}` } });
    expect(await p.lines()).toEqual(['own function', 'own probeHook', 'fn one two', 'code']);
  });

  it('nixLog always, nixErrorLog … nixDebugLog from their NIX_DEBUG level, all to NIX_LOG_FD and nothing without it', async () => {
    const p = await probe();
    const hook = await p.hook(
      'logs',
      'probeLogs() { nixLog plain; nixErrorLog bad; nixWarnLog careful; nixInfoLog info; nixDebugLog debug; }; preFixupHooks+=(probeLogs)',
    );
    const said = async (attrs: Record<string, string>, nixLogFd = true): Promise<string[]> =>
      (await built({ hooks: [hook], attrs, nixLogFd })).result.stderr.split('\n').filter((line) => line.includes('probeLogs'));
    expect(await said({})).toEqual(['probeLogs: plain', 'ERROR: probeLogs: bad']);
    expect(await said({ NIX_DEBUG: '3' })).toEqual([
      'probeLogs: plain',
      'ERROR: probeLogs: bad',
      'WARN: probeLogs: careful',
      'INFO: probeLogs: info',
    ]);
    expect(await said({ NIX_DEBUG: '6' })).toHaveLength(5);
    expect(await said({ NIX_DEBUG: '6' }, false)).toEqual([]);
  });

  it('NIX_BUILD_CORES: unset is 1, 0 is every core, anything else as it is', async () => {
    const p = await probe();
    // Read at fixup: setup.sh settles the number after sourcing the hooks.
    const hook = await p.hook('cores', `preFixupHooks+=('echo "$NIX_BUILD_CORES" >> ${shellQuote(p.log)}')`);
    await built({ hooks: [hook] });
    await built({ hooks: [hook], attrs: { NIX_BUILD_CORES: '0' } });
    await built({ hooks: [hook], attrs: { NIX_BUILD_CORES: '3' } });
    expect(await p.lines()).toEqual(['1', String(availableParallelism()), '3']);
  });
});
