// apply --auto-patchelf --interpreter on real programs, x86_64 natively and aarch64 under qemu-aarch64:
// every program of the tree gets the interpreter, as autoPatchelfHook's `patchelf --set-interpreter`
// gives it (Nixpkgs' glibc loader, here a copy of the real loader at another path), and the program
// then starts through it: /proc/self/maps shows the loader mapped. A library (no PT_INTERP) keeps none.
// The differential against Nixpkgs' auto-patchelf.py found the interpreter left unwritten on every
// aarch64 program of a Debian package tree (bench/results/2026-11-27-vm-auto-patchelf-differential.md).

import { copyFile, mkdir, realpath, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUILD_ARCHES } from './helpers/arch.js';
import { loaderOf, requireTool, runOn } from './helpers/fixtures.js';
import { LOADER_MAPS_SOURCE as MAPS_SOURCE } from './helpers/loader-maps.js';
import { interpreterOf } from './helpers/readelf.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { compile } from './helpers/rw-build.js';
import { makeTempDir } from './helpers/temp-dir.js';

let work = '';

beforeAll(async () => {
  assertCliBuilt();
  for (const tool of ['gcc', 'aarch64-linux-gnu-gcc', 'qemu-aarch64', 'readelf']) requireTool(tool);
  work = await realpath(await makeTempDir('auto-patchelf-interpreter'));
}, 60_000);

afterAll(async () => {
  if (work !== '') await rm(work, { recursive: true, force: true });
});

describe.each(BUILD_ARCHES)('%s', (arch) => {
  it('every program gets --interpreter and starts through it; a library keeps none', async () => {
    const tree = join(work, arch, 'tree');
    await mkdir(join(tree, 'bin'), { recursive: true });
    await mkdir(join(tree, 'lib'), { recursive: true });
    const program = await compile(arch, join(tree, 'bin'), 'maps', { 'maps.c': MAPS_SOURCE });
    const library = await compile(arch, join(tree, 'lib'), 'libmaps.so', { 'maps.c': MAPS_SOURCE }, ['-shared', '-fPIC']);
    // As Nix's glibc: the loader in a directory of its own, at a path longer than the default one.
    const interpreter = join(work, arch, 'glibc-2.40', 'lib', basename(loaderOf(arch)));
    await mkdir(join(interpreter, '..'), { recursive: true });
    await copyFile(loaderOf(arch), interpreter);
    // libc stays where the real loader is (the copy's directory holds none).
    const flags = ['--no-driver', '--auto-patchelf', '--interpreter', interpreter, '--libc-dir', dirname(await realpath(loaderOf(arch)))];

    const result = await runCli(['apply', tree, ...flags]);
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: '' });
    expect(await interpreterOf(program)).toBe(interpreter);
    expect(await interpreterOf(library)).toBeNull();
    const run = await runOn(arch, program, []);
    expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 0, stdout: `loader ${interpreter}\n` });
    // Done: check agrees that nothing is left to write.
    const again = await runCli(['check', tree, ...flags]);
    expect(again.code).toBe(0);
  });
});
