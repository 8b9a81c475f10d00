// Runs setup hooks the way a Nix builder does, without Nix: bash sources fixtures/nix/setup.sh (a small
// stand-in for stdenv's setup script that follows its protocol), which sources the hook files named in the
// input lists with the offsets of their list, then runs the build phase (which compiles the demo of
// fixtures/nix/src: bin/greet in out and lib/libgreet.so, which needs libcuda.so.1, in lib) and the fixup
// phase: stdenv's own fixupOutput hooks (separateDebugInfo, strip, patchelf --shrink-rpath), then the
// derivation's own postFixup and the postFixupHooks entries in order. Everything a derivation would set
// comes in as environment variables, as Nix passes derivation attributes, with NIX_LOG_FD=2 as Nix sets it.
// The hooks are either this project's (hooks/) or the restatement of Nixpkgs' own (fixtures/nix/nixpkgs/),
// run with the real patchelf: the same build with each gives the runpaths to compare. The cuda-patchelf
// the hooks find is a wrapper around the built CLI that logs each call.

import { mkdir, mkdtemp, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { REPO_ROOT, requireTool } from './fixtures.js';
import { assertCliBuilt, cliPath } from './run-cli.js';
import { makeTempDir } from './temp-dir.js';
import { dedupeRunpath, hasElfMagic, sha256File } from './tree-tools.js';
import { readDynamic, tagKind, type TagKind } from './readelf.js';
import { execTool, mustExec, type ExecResult } from './exec.js';

export const HOOKS_DIR = join(REPO_ROOT, 'hooks');
const STDENV_SETUP = join(REPO_ROOT, 'fixtures', 'nix', 'setup.sh');
export const NIXPKGS_HOOKS_DIR = join(REPO_ROOT, 'fixtures', 'nix', 'nixpkgs');
const BUILD_GREET = join(REPO_ROOT, 'fixtures', 'nix', 'build-greet.sh');

export const HOOK_FILES = {
  driver: join(HOOKS_DIR, 'auto-add-driver-runpath.sh'),
  compat: join(HOOKS_DIR, 'auto-add-cuda-compat-runpath.sh'),
  stubs: join(HOOKS_DIR, 'remove-stubs-from-runpath.sh'),
} as const;
export type HookName = keyof typeof HOOK_FILES;
/** Every hook, in the order a package lists them: driver, cuda_compat, stubs. */
export const EVERY_HOOK = ['driver', 'compat', 'stubs'] as const satisfies readonly HookName[];
/** The autoPatchelfHook drop-in, which has no restatement among Nixpkgs' hooks here: passed as a file. */
export const AUTO_PATCHELF_HOOK = join(HOOKS_DIR, 'auto-patchelf.sh');

/** The restatement of Nixpkgs' hooks, by the same names. */
export const NIXPKGS_HOOK_FILES: Readonly<Record<HookName, string>> = {
  driver: join(NIXPKGS_HOOKS_DIR, 'auto-add-driver-runpath.sh'),
  compat: join(NIXPKGS_HOOKS_DIR, 'auto-add-cuda-compat-runpath.sh'),
  stubs: join(NIXPKGS_HOOKS_DIR, 'remove-stubs-from-runpath.sh'),
};

/** Whose hooks a build sources: this project's shims, or Nixpkgs' restated. */
export type Flavour = 'shims' | 'nixpkgs';

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
  /**
   * NVIDIA-style link-time stubs: the directory holding the stub libcuda.so, in a package named as a store
   * path of CUDA's redistributables is (<hash>-cuda…/lib/stubs), which is what Nixpkgs' stubs hook recognises.
   */
  readonly stubsDir: string;
  /** Another stubs directory, of the other shape Nixpkgs recognises: a stubs output's lib (…-cuda…-stubs/lib). */
  readonly stubsOutputDir: string;
  /** The runpath entries the hooks add: <cudaCompat>/compat and <driverLink>/lib. */
  readonly compatEntry: string;
  readonly driverEntry: string;
}

/** The fake libcuda packages that every build links against or finds at run time, built once; the builds go under root too. */
export async function buildPackages(): Promise<Packages> {
  const root = await makeTempDir('shim');
  const driverLink = join(root, 'driver');
  const cudaCompat = join(root, 'cuda_compat');
  const packages = {
    root,
    driverLink,
    cudaCompat,
    stubsDir: join(root, '2kkmzg0yw2b0dmv5bpxf1irfm9k0l4hr-cuda12.8-cuda_cudart-12.8.90', 'lib', 'stubs'),
    stubsOutputDir: join(root, '4yq1zn2ykpsg8h2b9x5yv2ir81k8ldrp-cuda12.8-libcublas-12.8.4.1-stubs', 'lib'),
    compatEntry: `${cudaCompat}/compat`,
    driverEntry: `${driverLink}/lib`,
  };
  await buildGreet(['libcuda', join(packages.driverLink, 'lib'), String(VERSION.driver), '0']);
  await buildGreet(['libcuda', join(packages.cudaCompat, 'compat'), String(VERSION.compat), '0']);
  await buildGreet(['libcuda', packages.stubsDir, '0', '34']);
  await buildGreet(['libcuda', packages.stubsOutputDir, '0', '34']);
  return packages;
}

/** For a test file: the packages, built before its tests and removed with every build after them. */
export function usePackages(): () => Packages {
  return useBuiltBeforeAll('the shim packages', () => {
    assertCliBuilt();
    return buildPackages();
  });
}

/** For a test file: what `make` builds under its root, built before its tests and removed after them. */
export function useBuiltBeforeAll<T extends { readonly root: string }>(what: string, make: () => Promise<T>): () => T {
  let built: T | undefined;
  beforeAll(async () => {
    built = await make();
  });
  afterAll(async () => {
    if (built !== undefined) await rm(built.root, { recursive: true, force: true });
  });
  return () => {
    if (built === undefined) throw new Error(`${what} are built in beforeAll`);
    return built;
  };
}

function buildGreet(args: readonly string[]): Promise<ExecResult> {
  return mustExec(requireTool('bash'), [BUILD_GREET, ...args], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C' } });
}

/** A hook by name (this flavour's file), or any other setup hook: a file, or a package with nix-support/setup-hook. */
export type Input = HookName | string;

/** Where the builder's cuda-patchelf comes from. */
export type CliSource =
  /** a directory on PATH, as a nativeBuildInputs package puts it there */
  | 'path'
  /** CUDA_PATCHELF names it, nothing on PATH */
  | 'env'
  /** nowhere */
  | 'none'
  /** a package (bin/cuda-patchelf) in that input list, which puts it on PATH or not as stdenv decides */
  | 'nativeBuildInputs'
  | 'buildInputs';

export interface BuildOptions {
  /** nativeBuildInputs: the hooks in the order the list names them (hostOffset -1, targetOffset 0). */
  readonly hooks: readonly Input[];
  /** buildInputs (hostOffset 0, targetOffset 1). */
  readonly buildInputs?: readonly Input[];
  /** depsBuildBuild (hostOffset -1, targetOffset -1). */
  readonly depsBuildBuild?: readonly Input[];
  /** Derivation attributes (switches, phases' code, NIX_DEBUG, strictDeps, separateDebugInfo...). */
  readonly attrs?: Readonly<Record<string, string>>;
  /** How the hooks find cuda-patchelf (default: on PATH). */
  readonly cli?: CliSource;
  /** Pass the packages' paths to the hooks through their environment variables (default true). */
  readonly envPaths?: boolean;
  /** This project's hooks (default) or Nixpkgs' restated. */
  readonly flavour?: Flavour;
  /** Set NIX_LOG_FD=2, as Nix does for a build (default true); without it stdenv's nixLog is silent. */
  readonly nixLogFd?: boolean;
  /** Shell code the build phase runs after it built the demo (more files for the outputs). */
  readonly extraBuild?: string;
}

export interface Build {
  readonly dir: string;
  /** The outputs: out (bin/greet), lib (lib/libgreet.so), and debug when separateDebugInfo asks for it. */
  readonly out: string;
  readonly lib: string;
  readonly debug: string;
  readonly outputs: Readonly<Record<string, string>>;
  readonly greet: string;
  readonly libgreet: string;
  /** The builder's exit status and what it said. */
  readonly result: ExecResult;
  /** The argument lists cuda-patchelf was called with, one per call. */
  readonly calls: string[][];
}

/** Builds the demo into fresh outputs with the hooks, as a builder would: build phase, then fixup phase. */
export async function buildWithHooks(packages: Packages, options: BuildOptions): Promise<Build> {
  const dir = await mkdtemp(join(packages.root, 'build-'));
  const outputs: Record<string, string> = { out: join(dir, 'out'), lib: join(dir, 'lib') };
  if (options.attrs?.separateDebugInfo !== undefined) outputs.debug = join(dir, 'debug');

  const bin = join(dir, 'bin');
  const callLog = join(dir, 'calls.log');
  const wrapper = join(bin, 'cuda-patchelf');
  await mkdir(bin);
  // One line per call: the arguments, NUL-separated.
  await writeFile(
    wrapper,
    `#!/usr/bin/env bash\nprintf '%s\\0' "$@" >> ${shellQuote(callLog)}\necho >> ${shellQuote(callLog)}\nexec ${shellQuote(process.execPath)} ${shellQuote(cliPath)} "$@"\n`,
    { mode: 0o755 },
  );
  await writeFile(callLog, '');

  const flavour = options.flavour ?? 'shims';
  const files: Readonly<Record<HookName, string>> = flavour === 'shims' ? HOOK_FILES : NIXPKGS_HOOK_FILES;
  const list = (inputs: readonly Input[] | undefined, extra: readonly string[] = []): string =>
    [...(inputs ?? []).map((input) => (input in files ? files[input as HookName] : input)), ...extra].join(' ');
  const cli = options.cli ?? 'path';
  const systemPath = `${dirname(requireTool('gcc'))}:/usr/bin:/bin`;
  const env: Record<string, string> = {
    PATH: cli === 'path' ? `${bin}:${systemPath}` : systemPath,
    HOME: dir,
    LC_ALL: 'C',
    outputs: Object.keys(outputs).join(' '),
    ...outputs,
    phases: 'buildPhase fixupPhase',
    buildPhase: `bash ${shellQuote(BUILD_GREET)} greet "$out" "$lib" ${shellQuote(packages.stubsDir)}\n${options.extraBuild ?? ''}`,
    depsBuildBuild: list(options.depsBuildBuild),
    nativeBuildInputs: list(options.hooks, cli === 'nativeBuildInputs' ? [dir] : []),
    buildInputs: list(options.buildInputs, cli === 'buildInputs' ? [dir] : []),
    ...((options.nixLogFd ?? true) ? { NIX_LOG_FD: '2' } : {}),
    ...(cli === 'env' ? { CUDA_PATCHELF: wrapper } : {}),
    ...((options.envPaths ?? true)
      ? { CUDA_PATCHELF_DRIVER_LINK: packages.driverLink, CUDA_PATCHELF_CUDA_COMPAT: packages.cudaCompat }
      : {}),
    ...options.attrs,
  };
  const result = await execTool(requireTool('bash'), ['-c', 'source "$0" && genericBuild', STDENV_SETUP], { env, timeoutMs: 60_000 });
  const calls = (await readFile(callLog, 'utf8'))
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => line.split('\0').slice(0, -1));
  return {
    dir,
    out: outputs.out as string,
    lib: outputs.lib as string,
    debug: join(dir, 'debug'),
    outputs,
    greet: join(dir, 'out', 'bin', 'greet'),
    libgreet: join(dir, 'lib', 'lib', 'libgreet.so'),
    result,
    calls,
  };
}

/** Installs a hook file as makeSetupHook does: PARENT/NAME/nix-support/setup-hook with each @key@ replaced. */
export async function installHook(
  parent: string,
  name: string,
  file: string,
  substitutions: Readonly<Record<string, string>>,
): Promise<string> {
  let text = await readFile(file, 'utf8');
  for (const [key, value] of Object.entries(substitutions)) text = text.replaceAll(`@${key}@`, value);
  const pkg = join(parent, name);
  await mkdir(join(pkg, 'nix-support'), { recursive: true });
  await writeFile(join(pkg, 'nix-support', 'setup-hook'), text);
  return pkg;
}

export function shellQuote(text: string): string {
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

/** bin/greet, run with no loader variables, found the libcuda.so.1 of `found`: one of VERSION, or the link-time stub. */
export async function expectGreeting(build: Build, found: number | 'stub', what?: string): Promise<void> {
  expect((await runGreet(build)).stdout, what).toBe(found === 'stub' ? STUB_REPORT : greetReport(found));
}

/** Regular files (symbolic links not followed) under root, by path relative to it. */
async function regularFiles(root: string): Promise<string[]> {
  const found: string[] = [];
  const visit = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await visit(path);
      else if (entry.isFile()) found.push(path);
    }
  };
  await visit(root);
  return found.sort();
}

/** What a file's dynamic section says of its search path: the tag (none: neither) and its string. */
export interface SearchPath {
  readonly kind: TagKind;
  readonly runpath: string | null;
}

/**
 * The search path of every ELF file of every output (a file without a dynamic section, such as a
 * debug-info file, reads as none), by `<output>/<path>`, with the build's own directory written `<build>`
 * so that two builds compare.
 */
export function elfSearchPaths(build: Build): Promise<Record<string, SearchPath>> {
  return outputSearchPaths(build.outputs, { [build.dir]: '<build>' });
}

/**
 * The same for any outputs (name → directory), each key of `rename` written as its value in the runpaths.
 * A debug file goes by the name of the file it is for (lib/debug/.build-id/<libgreet.so>.debug): its build
 * ID differs from one build to the next.
 */
export async function outputSearchPaths(
  outputs: Readonly<Record<string, string>>,
  rename: Readonly<Record<string, string>>,
): Promise<Record<string, SearchPath>> {
  const result: Record<string, SearchPath> = {};
  for (const [name, root] of Object.entries(outputs)) {
    const debugNames = await debugFileNames(root);
    for (const file of await regularFiles(root)) {
      if (!(await hasElfMagic(file))) continue;
      let runpath = await runpathOf(file);
      for (const [from, to] of Object.entries(rename)) runpath = runpath?.replaceAll(from, to) ?? null;
      const facts = await readDynamic(file);
      result[`${name}/${debugNames.get(file) ?? relative(root, file)}`] = { kind: facts === null ? 'none' : tagKind(facts), runpath };
    }
  }
  return result;
}

/** separateDebugInfo's links lib/debug/NAME → .build-id/xx/yyyy.debug, as debug file → lib/debug/.build-id/<NAME>.debug. */
async function debugFileNames(root: string): Promise<Map<string, string>> {
  const names = new Map<string, string>();
  const dir = join(root, 'lib', 'debug');
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (!entry.isSymbolicLink()) continue;
    names.set(join(dir, await readlink(join(dir, entry.name))), `lib/debug/.build-id/<${entry.name}>.debug`);
  }
  return names;
}

/**
 * The runpath strings alone, as cuda-patchelf's default semantics would give them from Nixpkgs': deduped,
 * no empty entry, and an empty runpath (which searches nothing) the same as none.
 */
export function dedupedRunpaths(paths: Readonly<Record<string, SearchPath>>): Record<string, string | null> {
  return Object.fromEntries(
    Object.entries(paths).map(([file, { runpath }]) => [file, runpath === null ? null : dedupeRunpath(runpath) || null]),
  );
}

/** The files under lib/debug of the debug output (the .debug files separateDebugInfo wrote), by path. */
export async function debugFiles(build: Build): Promise<string[]> {
  return regularFiles(join(build.debug, 'lib', 'debug'));
}

/**
 * A derivation's postFixup that notes the hashes of the debug files: it runs after separateDebugInfo wrote
 * them and before the hooks.
 */
export const NOTE_DEBUG_FILES = 'find "$debug/lib/debug" -type f -print0 | sort -z | xargs -0 sha256sum > "$debug/../debug-files.sha256"';

/** The build wrote `count` debug files, and each is what objcopy wrote: the hash NOTE_DEBUG_FILES noted before the hooks ran. */
export async function expectDebugFilesUntouched(build: Build, count: number): Promise<void> {
  const noted = (await readFile(join(build.dir, 'debug-files.sha256'), 'utf8')).trim().split('\n');
  const files = await debugFiles(build);
  expect(files.filter((file) => file.endsWith('.debug'))).toHaveLength(count);
  expect(noted).toHaveLength(files.length);
  for (const line of noted) {
    const [hash, file] = line.split(/\s+/) as [string, string];
    expect(await sha256File(file), file).toBe(hash);
  }
}
