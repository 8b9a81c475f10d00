// Runs the setup hooks of hooks/ the way a Nix builder does, without Nix: bash sources
// fixtures/nix/setup.sh (a small stand-in for stdenv's setup script), which sources the hook files named in
// nativeBuildInputs, and runs the fixup phase, whose `runHook postFixup` runs the derivation's own
// postFixup and then the postFixupHooks entries in order. Everything a derivation would set comes in as
// environment variables, as Nix passes derivation attributes. The outputs hold the demo of
// fixtures/nix/src (bin/greet and lib/libgreet.so, which needs libcuda.so.1), built fresh for each build;
// the cuda-patchelf the hooks find is a wrapper around the built CLI that logs each call.

import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { REPO_ROOT, requireTool } from './fixtures.js';
import { assertCliBuilt, cliPath } from './run-cli.js';
import { execTool, makeTempDir, mustExec, readDynamic, type ExecResult } from './tree-tools.js';

export const HOOKS_DIR = join(REPO_ROOT, 'hooks');
export const STDENV_SETUP = join(REPO_ROOT, 'fixtures', 'nix', 'setup.sh');
const BUILD_GREET = join(REPO_ROOT, 'fixtures', 'nix', 'build-greet.sh');

export const HOOK_FILES = {
  driver: join(HOOKS_DIR, 'auto-add-driver-runpath.sh'),
  compat: join(HOOKS_DIR, 'auto-add-cuda-compat-runpath.sh'),
  stubs: join(HOOKS_DIR, 'remove-stubs-from-runpath.sh'),
} as const;
export type HookName = keyof typeof HOOK_FILES;

/** The fake libcuda versions: the program prints which copy the loader found. */
export const VERSION = { driver: 12020, compat: 12040 } as const;

/** What bin/greet prints when it found the libcuda of that version; the stub answers result 34. */
export function greetReport(version: number): string {
  return `cuDriverGetVersion: result 0, version ${version}\n`;
}
export const STUB_REPORT = 'cuDriverGetVersion: result 34, version 0\n';

export interface Packages {
  readonly root: string;
  /** The driver link: its lib/ holds the driver's libcuda.so.1. */
  readonly driverLink: string;
  /** A cuda_compat package: compat/libcuda.so.1. */
  readonly cudaCompat: string;
  /** NVIDIA-style link-time stubs: the directory holding the stub libcuda.so. */
  readonly stubsDir: string;
  /** The runpath entries the hooks add: <cudaCompat>/compat and <driverLink>/lib. */
  readonly compatEntry: string;
  readonly driverEntry: string;
}

/** The fake libcuda packages that every build links against or finds at run time, built once; the builds go under root too. */
export async function buildPackages(): Promise<Packages> {
  const root = await makeTempDir('shim');
  const driverLink = join(root, 'driver');
  const cudaCompat = join(root, 'cuda_compat');
  const packages = { root, driverLink, cudaCompat, stubsDir: join(root, 'stubs', 'lib', 'stubs'), compatEntry: `${cudaCompat}/compat`, driverEntry: `${driverLink}/lib` };
  await buildGreet(['libcuda', join(packages.driverLink, 'lib'), String(VERSION.driver), '0']);
  await buildGreet(['libcuda', join(packages.cudaCompat, 'compat'), String(VERSION.compat), '0']);
  await buildGreet(['libcuda', packages.stubsDir, '0', '34']);
  return packages;
}

/** For a test file: the packages, built before its tests and removed with every build after them. */
export function usePackages(): () => Packages {
  let packages: Packages | undefined;
  beforeAll(async () => {
    assertCliBuilt();
    packages = await buildPackages();
  });
  afterAll(async () => {
    if (packages !== undefined) await rm(packages.root, { recursive: true, force: true });
  });
  return () => {
    if (packages === undefined) throw new Error('the shim packages are built in beforeAll');
    return packages;
  };
}

function buildGreet(args: readonly string[]): Promise<ExecResult> {
  return mustExec(requireTool('bash'), [BUILD_GREET, ...args], { env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', LC_ALL: 'C' } });
}

export interface BuildOptions {
  /** The hook files in the order nativeBuildInputs names them (a name twice: sourced twice). */
  readonly hooks: readonly (HookName | string)[];
  /** Derivation attributes (switches, phases' code, NIX_DEBUG...). */
  readonly attrs?: Readonly<Record<string, string>>;
  /** How the hooks find cuda-patchelf: on PATH (default), through CUDA_PATCHELF, or not at all. */
  readonly cli?: 'path' | 'env' | 'none';
  /** Pass the packages' paths to the hooks through their environment variables (default true). */
  readonly envPaths?: boolean;
}

export interface Build {
  readonly dir: string;
  /** The two outputs: out (bin/greet) and lib (lib/libgreet.so). */
  readonly out: string;
  readonly lib: string;
  readonly greet: string;
  readonly libgreet: string;
  /** The builder's exit status and what it said. */
  readonly result: ExecResult;
  /** The argument lists cuda-patchelf was called with, one per call. */
  readonly calls: string[][];
}

/** Builds the demo into fresh outputs and runs the fixup phase with the hooks, as a builder would. */
export async function buildWithHooks(packages: Packages, options: BuildOptions): Promise<Build> {
  const dir = await mkdtemp(join(packages.root, 'build-'));
  const out = join(dir, 'out');
  const lib = join(dir, 'lib');
  await buildGreet(['greet', out, lib, packages.stubsDir]);

  const bin = join(dir, 'bin');
  const callLog = join(dir, 'calls.log');
  const wrapper = join(bin, 'cuda-patchelf');
  await mkdir(bin);
  // One line per call: the arguments, NUL-separated.
  await writeFile(wrapper, `#!/usr/bin/env bash\nprintf '%s\\0' "$@" >> ${shellQuote(callLog)}\necho >> ${shellQuote(callLog)}\nexec ${shellQuote(process.execPath)} ${shellQuote(cliPath)} "$@"\n`, { mode: 0o755 });
  await writeFile(callLog, '');

  const cli = options.cli ?? 'path';
  const systemPath = `${dirname(requireTool('gcc'))}:/usr/bin:/bin`;
  const env: Record<string, string> = {
    PATH: cli === 'path' ? `${bin}:${systemPath}` : systemPath,
    HOME: dir,
    LC_ALL: 'C',
    outputs: 'out lib',
    out,
    lib,
    phases: 'fixupPhase',
    nativeBuildInputs: options.hooks.map((hook) => (hook in HOOK_FILES ? HOOK_FILES[hook as HookName] : hook)).join(' '),
    ...(cli === 'env' ? { CUDA_PATCHELF: wrapper } : {}),
    ...(options.envPaths ?? true ? { CUDA_PATCHELF_DRIVER_LINK: packages.driverLink, CUDA_PATCHELF_CUDA_COMPAT: packages.cudaCompat } : {}),
    ...options.attrs,
  };
  const result = await execTool(requireTool('bash'), ['-c', 'source "$0" && genericBuild', STDENV_SETUP], { env, timeoutMs: 60_000 });
  const calls = (await readFile(callLog, 'utf8'))
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => line.split('\0').slice(0, -1));
  return { dir, out, lib, greet: join(out, 'bin', 'greet'), libgreet: join(lib, 'lib', 'libgreet.so'), result, calls };
}

function shellQuote(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}

/** The builder succeeded (with what it said when it did not). */
export function expectBuilt(build: Build): void {
  expect(build.result.code, `builder failed:\n${build.result.stderr}${build.result.stdout}`).toBe(0);
}

/** The file's DT_RUNPATH as readelf and patchelf read it (they must agree). */
export async function runpathOf(file: string): Promise<string | null> {
  const facts = await readDynamic(file);
  const printed = (await mustExec(requireTool('patchelf'), ['--print-rpath', file])).stdout.replace(/\n$/, '');
  const fromReadelf = facts?.runpath ?? facts?.rpath ?? null;
  expect(printed, `patchelf and readelf disagree on ${file}`).toBe(fromReadelf ?? '');
  return fromReadelf;
}

/** Runs bin/greet with no loader variables: what it prints says which libcuda.so.1 the runpaths found. */
export function runGreet(build: Build): Promise<ExecResult> {
  return execTool(build.greet, [], { env: { PATH: '/usr/bin:/bin', LC_ALL: 'C' }, timeoutMs: 30_000 });
}
