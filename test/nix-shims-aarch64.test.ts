// The Jetson case in a real Nix build: the two-output derivation of fixtures/nix/default.nix for
// aarch64-linux, built on this x86_64 machine (extra-platforms) with the cross compiler, the cuda_compat,
// driver and stubs hooks sourced in that order. Its install check runs the aarch64 program inside the
// build, which works only through qemu registered with binfmt_misc (registered here for the test and
// removed after it). The files in /nix/store must be aarch64, carry cuda_compat's directory before the
// driver's, load cuda_compat's libcuda under qemu, and no longer reference the stubs.

import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireTool } from './helpers/fixtures.js';
import { ensureAarch64Binfmt } from './helpers/nix-binfmt.js';
import { openNixRun, type NixRun } from './helpers/nix-build.js';
import { VERSION, greetReport, runpathOf } from './helpers/shim-stdenv.js';
import { describeExec } from './helpers/verify.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { execTool, type ExecResult } from './helpers/exec.js';
import { readelfText } from './helpers/readelf.js';

const SYSROOT = '/usr/aarch64-linux-gnu';

let dir = '';
let driverLink = '';
let run: NixRun;
let built: ExecResult;
let releaseBinfmt: (() => Promise<void>) | undefined;

beforeAll(async () => {
  requireTool(join(SYSROOT, 'lib', 'ld-linux-aarch64.so.1'));
  dir = await makeTempDir('nix-aarch64');
  driverLink = join(dir, 'run', 'opengl-driver');
  releaseBinfmt = await ensureAarch64Binfmt();
  run = await openNixRun({
    driverLink,
    system: 'aarch64-linux',
    cc: requireTool('aarch64-linux-gnu-gcc'),
    qemuLdPrefix: SYSROOT,
    config: ['extra-platforms = aarch64-linux'],
  });
  built = await run.build(['greet']);
});

afterAll(async () => {
  await run?.remove();
  await releaseBinfmt?.();
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

describe('a real Nix build with the hooks (aarch64-linux through qemu binfmt)', () => {
  it('built aarch64 files, and ran the program inside the build', async () => {
    for (const file of [join(run.output('greet', 'out'), 'bin', 'greet'), join(run.output('greet', 'lib'), 'lib', 'libgreet.so')]) {
      expect(await readelfText(['-h'], file)).toMatch(/Machine:\s+AArch64/);
    }
    expect(built.stderr).toContain(`install check: ${greetReport(VERSION.compat)}`);
  });

  it('leaves cuda_compat before the driver in the files of both outputs, the stubs entry gone', async () => {
    const compat = `${run.output('cudaCompat', 'out')}/compat`;
    expect(await runpathOf(join(run.output('greet', 'lib'), 'lib', 'libgreet.so'))).toBe(`${compat}:${driverLink}/lib`);
    expect(await runpathOf(join(run.output('greet', 'out'), 'bin', 'greet'))).toBe(
      `${compat}:${driverLink}/lib:${run.output('greet', 'lib')}/lib`,
    );
  });

  it("runs from /nix/store under qemu-aarch64 and loads cuda_compat's libcuda", async () => {
    const program = join(run.output('greet', 'out'), 'bin', 'greet');
    const result = await execTool(requireTool('qemu-aarch64'), ['-L', SYSROOT, program], { env: { PATH: '/usr/bin:/bin', LC_ALL: 'C' } });
    expect(result.stdout, describeExec(program, result)).toBe(greetReport(VERSION.compat));
    expect(result.code).toBe(0);
  });

  it('drops the stubs from the references Nix finds', async () => {
    const compat = run.output('cudaCompat', 'out');
    expect(await run.references(run.output('greet', 'lib'))).toEqual([compat]);
    expect(await run.references(run.output('greet', 'out'))).toEqual([compat, run.output('greet', 'lib')].sort());
  });
});
