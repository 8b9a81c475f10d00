// CUDA-shaped outputs for doctor's CUDA checks, without a GPU: a program that uses the CUDA runtime
// (the real libcudart 11.8 of the fixtures), a driver directory as /run/opengl-driver/lib holds it and a
// cuda_compat package (DIR/compat), each with the fixtures' real libcuda under the version a test names.

import { constants } from 'node:fs';
import { copyFile, mkdir, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { BuildArch } from './arch.js';
import { compileProgram } from './compile.js';
import { cudaFixture } from './fixtures.js';

/**
 * A copy of a fixture (a reflink where the file system offers one: libcuda is 29 MB). Never a hard link:
 * a test that edits the file it placed would edit the shared fixture, and every test that reads it.
 */
export async function place(from: string, to: string): Promise<string> {
  await mkdir(dirname(to), { recursive: true });
  await copyFile(from, to, constants.COPYFILE_FICLONE);
  return to;
}

/** DIR/libcuda.so.VERSION (the real driver library of the fixtures) and the libcuda.so.1 link to it. */
export async function libcudaAt(dir: string, version: string, arch: BuildArch = 'x86_64'): Promise<string> {
  const file = await place(cudaFixture(arch, 'libcuda1').path, join(dir, `libcuda.so.${version}`));
  await symlink(`libcuda.so.${version}`, join(dir, 'libcuda.so.1'));
  return file;
}

export interface CudaOutput {
  readonly root: string;
  readonly probe: string;
  readonly cudart: string;
}

/** OUT/bin/probe (asks the runtime for the device count) and OUT/lib/libcudart.so.11.0, found through $ORIGIN/../lib. */
export async function cudaOutput(root: string, arch: BuildArch = 'x86_64', programRunpath = '$ORIGIN/../lib'): Promise<CudaOutput> {
  const cudart = join(root, 'lib/libcudart.so.11.0');
  await mkdir(dirname(cudart), { recursive: true });
  // A copy: apply edits it in place.
  await copyFile(cudaFixture(arch, 'libcudart11.0').path, cudart);
  const probe = await compileProbe(root, arch, cudart, 'printf("%d\\n", cudaGetDeviceCount(&n));', programRunpath);
  return { root, probe, cudart };
}

/**
 * ROOT/bin/probe: a program whose main declares `int n` and runs `body` (which calls cudaGetDeviceCount),
 * linked against `cudart` with DT_RUNPATH `runpath`.
 */
export async function compileProbe(root: string, arch: BuildArch, cudart: string, body: string, runpath: string): Promise<string> {
  const source = join(root, 'probe.c');
  await writeFile(source, `#include <stdio.h>\nint cudaGetDeviceCount(int *);\nint main(void) { int n = 0; ${body} return 0; }\n`);
  return compileProgram(join(root, 'bin/probe'), source, { arch, needs: [cudart], runpath });
}
