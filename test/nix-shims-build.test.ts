// The hooks of hooks/ in a real Nix build (fixtures/nix/default.nix, Debian's nix-bin, offline, as root):
// a two-output derivation whose builder compiles bin/greet and lib/libgreet.so with gcc, linked against
// NVIDIA-style stubs, sources the hooks (installed as makeSetupHook installs them) and runs the fixup. In
// /nix/store the files must carry cuda_compat's directory before the driver's, the program must run and
// load cuda_compat's libcuda.so.1, and Nix must no longer count the stubs package as a dependency: only
// the old runpath held its path, and cuda-patchelf zeroes the bytes of a dropped entry.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { useDriverLinkedBuild, type NixRun } from './helpers/nix-build.js';
import { cliPath } from './helpers/run-cli.js';
import { VERSION, greetReport, runpathOf } from './helpers/shim-stdenv.js';
import { describeExec } from './helpers/verify.js';
import { execTool, type ExecResult } from './helpers/exec.js';

const nix = useDriverLinkedBuild('nix', ['greet', 'greetStubsKept', 'greetDriver', 'greetStrictDeps', 'greetStrictDepsNative']);
let run: NixRun;
let driverLink: string;
let built: ExecResult;
beforeAll(() => {
  ({ run, driverLink, built } = nix());
});

describe('a real Nix build with the hooks (x86_64-linux)', () => {
  it('installs the hooks as makeSetupHook does: placeholders filled in nix-support/setup-hook', async () => {
    const hook = await readFile(join(run.output('driverHook', 'out'), 'nix-support', 'setup-hook'), 'utf8');
    expect(hook).toContain(`cudaPatchelfAddHook driver "${driverLink}" CUDA_PATCHELF_DRIVER_LINK`);
    expect(hook).not.toMatch(/@driverLink@|@cudaPatchelfFixup@/);
    const compatHook = await readFile(join(run.output('cudaCompatHook', 'out'), 'nix-support', 'setup-hook'), 'utf8');
    expect(compatHook).toContain(`cudaPatchelfAddHook cuda-compat "${run.output('cudaCompat', 'out')}"`);
    // The stubs hook names the driver directory too (its replacement for the first stubs entry), and each
    // hook the cuda-patchelf it was installed with, which the builds run without CUDA_PATCHELF or PATH.
    const stubsHook = await readFile(join(run.output('removeStubsHook', 'out'), 'nix-support', 'setup-hook'), 'utf8');
    expect(stubsHook).toContain(`cudaPatchelfAddHook remove-stubs "${driverLink}" CUDA_PATCHELF_DRIVER_LINK`);
    for (const text of [hook, compatHook, stubsHook]) expect(text).toContain(`cudaPatchelfUseCli "${cliPath}"`);
  });

  it('leaves cuda_compat before the driver in the files of both outputs, the stubs entry gone', async () => {
    const compat = `${run.output('cudaCompat', 'out')}/compat`;
    const driver = `${driverLink}/lib`;
    expect(await runpathOf(join(run.output('greet', 'lib'), 'lib', 'libgreet.so'))).toBe(`${compat}:${driver}`);
    expect(await runpathOf(join(run.output('greet', 'out'), 'bin', 'greet'))).toBe(`${compat}:${driver}:${run.output('greet', 'lib')}/lib`);
    expect(await runpathOf(join(run.output('greetStubsKept', 'lib'), 'lib', 'libgreet.so'))).toBe(
      `${compat}:${driver}:${run.output('stubs', 'out')}/lib/stubs`,
    );
    expect(await runpathOf(join(run.output('greetDriver', 'lib'), 'lib', 'libgreet.so'))).toBe(driver);
    expect(await runpathOf(join(run.output('greetDriver', 'out'), 'bin', 'greet'))).toBe(
      `${driver}:${run.output('greetDriver', 'lib')}/lib`,
    );
  });

  it("runs from /nix/store and loads cuda_compat's libcuda, or the driver's through the driver link", async () => {
    // The builds' own install checks ran the programs too.
    expect(built.stderr).toContain(`install check: ${greetReport(VERSION.compat)}`);
    expect(built.stderr).toContain(`install check: ${greetReport(VERSION.driver)}`);
    for (const [attr, version] of [
      ['greet', VERSION.compat],
      ['greetDriver', VERSION.driver],
    ] as const) {
      const program = join(run.output(attr, 'out'), 'bin', 'greet');
      const result = await execTool(program, [], { env: { PATH: '/usr/bin:/bin', LC_ALL: 'C' } });
      expect(result.stdout, describeExec(program, result)).toBe(greetReport(version));
      expect(result.code).toBe(0);
    }
  });

  it('drops the stubs from the references Nix finds: only the old runpath held their path', async () => {
    const stubs = run.output('stubs', 'out');
    const compat = run.output('cudaCompat', 'out');
    expect(await run.references(run.output('greet', 'lib'))).toEqual([compat]);
    expect(await run.references(run.output('greet', 'out'))).toEqual([compat, run.output('greet', 'lib')].sort());
    expect(await run.references(run.output('greetDriver', 'lib'))).toEqual([]);
    // The same build without stubs removal still depends on them: the query can tell.
    expect(await run.references(run.output('greetStubsKept', 'lib'))).toEqual([compat, stubs].sort());
    const bytes = await readFile(join(run.output('greet', 'lib'), 'lib', 'libgreet.so'));
    expect(bytes.includes(Buffer.from(stubs.slice('/nix/store/'.length, '/nix/store/'.length + 32)))).toBe(false);
  });

  it('under strictDeps, removes the stubs with the stubs hook in depsBuildBuild (docs/nix.md), and not from nativeBuildInputs', async () => {
    const compat = run.output('cudaCompat', 'out');
    const driver = `${driverLink}/lib`;
    expect(await runpathOf(join(run.output('greetStrictDeps', 'lib'), 'lib', 'libgreet.so'))).toBe(`${compat}/compat:${driver}`);
    expect(await run.references(run.output('greetStrictDeps', 'lib'))).toEqual([compat]);
    expect(await runpathOf(join(run.output('greetStrictDepsNative', 'lib'), 'lib', 'libgreet.so'))).toBe(
      `${compat}/compat:${driver}:${run.output('stubs', 'out')}/lib/stubs`,
    );
    expect(await run.references(run.output('greetStrictDepsNative', 'lib'))).toEqual([compat, run.output('stubs', 'out')].sort());
    expect(built.stderr).toContain(
      'cuda-patchelf hook: the remove-stubs hook stays out: under strictDeps it works from depsBuildBuild only (sourced with hostOffset=-1 targetOffset=0)',
    );
  });

  it('ran cuda-patchelf once per build, and its command line shows in the log under NIX_DEBUG', () => {
    expect(built.stderr.match(/cuda-patchelf apply: /g)).toHaveLength(5);
    expect(built.stderr).toContain(
      `cuda-patchelf hook: command: '${cliPath}' 'apply' '--make-writable' '--driver-link' '${driverLink}' '--cuda-compat' '${run.output('cudaCompat', 'out')}' '--remove-stubs'`,
    );
    expect(built.stderr).toContain('cuda-patchelf hook: the remove-stubs hook is off: dontUseRemoveStubsFromRunpath is set');
  });
});
