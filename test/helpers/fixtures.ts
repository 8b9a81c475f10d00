// Typed access to fixtures/.cache/manifest.json (written by fixtures/build.sh) and small
// wrappers around the real tools the tests check results with. Missing tools or fixtures are
// errors, never skips.
import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Arch, BuildArch } from './arch.js';
import { cleanEnv, execTool, type ExecResult } from './exec.js';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** fixtures/build.sh writes here (CUDA_PATCHELF_FIXTURES_CACHE moves the cache for both). */
export const CACHE_DIR = resolve(process.env.CUDA_PATCHELF_FIXTURES_CACHE ?? join(REPO_ROOT, 'fixtures', '.cache'));
const MANIFEST_PATH = join(CACHE_DIR, 'manifest.json');

export type Origin = 'compiled' | 'debian' | 'cuda' | 'npm';
export type FixtureKind = 'pie' | 'exec' | 'shared' | 'static';
export type Linker = 'bfd' | 'lld' | 'gold';

export interface Fixture {
  /** e.g. "compiled/x86_64/pie-runpath", "cuda/aarch64/libcublas11/libcublas.so.11.11.3.6" */
  id: string;
  /** Absolute path of the ELF file (never a symlink). */
  path: string;
  arch: Arch;
  elfClass: 32 | 64;
  endian: 'little' | 'big';
  origin: Origin;
  kind: FixtureKind;
  /** Largest PT_LOAD p_align (link-time max-page-size): 4096, 65536, 2 MiB for x86_64 CUDA. */
  pageSize: number | null;
  /** An executable this machine runs natively (x86_64) or under qemu-aarch64 -L sysroot. */
  runnable: boolean;
  /** The line a runnable program prints (without the newline). */
  expectedOutput: string | null;
  /** Directories (":"-separated) to put on LD_LIBRARY_PATH to run or load the fixture. */
  libraryPath: string | null;
  linker: Linker | null;
  /** runpath | rpath | no-runpath | big-dynstr | no-sections | lld | gold | static | static-pie |
   *  cxx-throw | alt-greet | dlopen-probe | dynamic-loader | no-dlopen | large | deb:<package> |
   *  npm:<package> */
  tags: string[];
}

export interface Manifest {
  version: 1;
  cacheDir: string;
  sysroots: { aarch64: string };
  layout: Record<string, string>;
  fixtures: Fixture[];
}

/** Runpath values of the compiled fixtures (fixtures/build.sh). */
export const FIXTURE_RUNPATH = {
  program: '$ORIGIN/../lib:/opt/cuda-patchelf-fixture/lib',
  library: '$ORIGIN:/opt/cuda-patchelf-fixture/lib',
} as const;

/** What the compiled programs print, depending on which libgreet.so.1 they load. */
export const GREETING = 'hello from libgreet';
export const GREETING_ALT = 'hello from libgreet (alt)';

let cached: Manifest | undefined;

/** Reads (once) and checks the manifest; throws when fixtures/build.sh has not run. */
export function loadManifest(): Manifest {
  if (cached) return cached;
  if (!existsSync(MANIFEST_PATH)) {
    throw new Error(`${MANIFEST_PATH} not found: run bash fixtures/build.sh (the vitest global setup does)`);
  }
  const parsed: unknown = JSON.parse(readFileSync(MANIFEST_PATH, 'utf8'));
  if (
    typeof parsed !== 'object' ||
    parsed === null ||
    (parsed as { version?: unknown }).version !== 1 ||
    !Array.isArray((parsed as { fixtures?: unknown }).fixtures)
  ) {
    throw new Error(`${MANIFEST_PATH}: not a version 1 fixture manifest; rerun bash fixtures/build.sh`);
  }
  cached = parsed as Manifest;
  return cached;
}

export type FixtureFilter =
  | ((fixture: Fixture) => boolean)
  | (Partial<Pick<Fixture, 'arch' | 'origin' | 'kind' | 'runnable' | 'linker' | 'elfClass' | 'endian' | 'pageSize'>> & {
      /** Every one of these tags must be present. */
      tags?: string[];
      /** Matches when the id starts with this string. */
      idPrefix?: string;
    });

/** All fixtures, or those matching the filter (fields compared with ===). */
export function fixtures(filter?: FixtureFilter): Fixture[] {
  const all = loadManifest().fixtures;
  if (filter === undefined) return all;
  if (typeof filter === 'function') return all.filter(filter);
  const { tags, idPrefix, ...fields } = filter;
  return all.filter((f) => {
    if (idPrefix !== undefined && !f.id.startsWith(idPrefix)) return false;
    if (tags !== undefined && !tags.every((t) => f.tags.includes(t))) return false;
    for (const [key, value] of Object.entries(fields)) {
      if (value !== undefined && f[key as keyof typeof fields] !== value) return false;
    }
    return true;
  });
}

/** The fixture with this id; throws when there is none. */
export function fixture(id: string): Fixture {
  const found = loadManifest().fixtures.find((f) => f.id === id);
  if (!found) throw new Error(`no fixture with id ${id} in ${MANIFEST_PATH}`);
  return found;
}

/** The qemu sysroot for an architecture that needs one (aarch64). */
export function sysroot(arch: Arch): string {
  if (arch !== 'aarch64') throw new Error(`no sysroot for ${arch}: only aarch64 runs under qemu here`);
  const dir = loadManifest().sysroots.aarch64;
  if (!existsSync(join(dir, 'lib', 'ld-linux-aarch64.so.1'))) {
    throw new Error(`${dir} has no lib/ld-linux-aarch64.so.1: rerun bash fixtures/build.sh`);
  }
  return dir;
}

const toolCache = new Map<string, string>();

/** Absolute path of a tool on PATH (or an absolute path that exists); throws when missing. */
export function requireTool(name: string): string {
  const hit = toolCache.get(name);
  if (hit) return hit;
  const candidates = name.includes('/')
    ? [name]
    : (process.env.PATH ?? '')
        .split(delimiter)
        .filter(Boolean)
        .map((dir) => join(dir, name));
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      toolCache.set(name, candidate);
      return candidate;
    } catch {
      // keep looking
    }
  }
  throw new Error(`required tool "${name}" not found on PATH: run bash fixtures/install-system-deps.sh`);
}

/** The binutils tool for an architecture: strip, objcopy, readelf... with the cross prefix. */
export function crossTool(arch: Arch, name: string): string {
  const prefix = { x86_64: '', aarch64: 'aarch64-linux-gnu-', arm: 'arm-linux-gnueabihf-', ppc64: 'powerpc64-linux-gnu-' }[arch];
  return requireTool(`${prefix}${name}`);
}

/** The library of a downloaded CUDA package (libcuda1, libcudart11.0, …) for an architecture. */
export function cudaFixture(arch: BuildArch, pkg: string): Fixture {
  const found = fixtures({ arch, origin: 'cuda' }).find((f) => f.id.startsWith(`cuda/${arch}/${pkg}/`));
  if (found === undefined) throw new Error(`no cuda/${arch}/${pkg} fixture: run bash fixtures/build.sh`);
  return found;
}

/** The C (or C++) compiler driver that builds for an architecture: gcc, or the cross gcc. */
export function compilerFor(arch: BuildArch, language: 'c' | 'c++' = 'c'): string {
  return crossTool(arch, language === 'c' ? 'gcc' : 'g++');
}

export interface RunOptions {
  /** Run this file instead of fixture.path (e.g. a patched copy). */
  path?: string;
  args?: string[];
  /** Overrides fixture.libraryPath; null runs without LD_LIBRARY_PATH. */
  libraryPath?: string | null;
  /** Extra variables for the program (for aarch64 passed to the guest with qemu -E). */
  env?: Record<string, string>;
}

/** Variables for a program: `env`, and LD_LIBRARY_PATH when `libraryPath` is a non-empty string. */
export function programVars(libraryPath: string | null | undefined, env: Readonly<Record<string, string>> = {}): Record<string, string> {
  return libraryPath === null || libraryPath === undefined || libraryPath === '' ? { ...env } : { ...env, LD_LIBRARY_PATH: libraryPath };
}

/**
 * The one way the tests run a program of an architecture: natively for x86_64, under qemu-aarch64 -L
 * <sysroot> for aarch64. `vars` reach the program only (qemu -E): LD_DEBUG or LD_LIBRARY_PATH must
 * not reach the host's loader that starts qemu. Never throws on failure: the result says what happened.
 */
export function runOn(
  arch: Arch,
  file: string,
  args: readonly string[],
  vars: Readonly<Record<string, string>> = {},
  timeoutMs = 60_000,
): Promise<ExecResult> {
  switch (arch) {
    case 'x86_64':
      return execTool(file, args, { env: cleanEnv(vars), timeoutMs });
    case 'aarch64': {
      const guest = Object.entries(vars).flatMap(([key, value]) => ['-E', `${key}=${value}`]);
      return execTool(requireTool('qemu-aarch64'), ['-L', sysroot('aarch64'), ...guest, file, ...args], { env: cleanEnv(), timeoutMs });
    }
    default:
      throw new Error(`no way to run ${arch} programs on this machine (${file})`);
  }
}

/** The dynamic loader of an architecture, as a path that runOn can execute (and --interpreter can name). */
export function loaderOf(arch: Arch): string {
  switch (arch) {
    case 'x86_64':
      return requireTool('/lib64/ld-linux-x86-64.so.2');
    case 'aarch64':
      return join(sysroot('aarch64'), 'lib', 'ld-linux-aarch64.so.1');
    default:
      throw new Error(`no loader for ${arch} on this machine`);
  }
}

/** `ld.so --list FILE` with the architecture's loader; never throws on failure. */
export function listDependencies(
  file: string,
  arch: Arch,
  libraryPath?: string | null,
  vars: Readonly<Record<string, string>> = {},
): Promise<ExecResult> {
  return runOn(arch, loaderOf(arch), ['--list', file], programVars(libraryPath, vars));
}

/** A result that must have succeeded: throws with the command's output otherwise. */
function succeeded(what: string, result: ExecResult): ExecResult {
  if (result.code !== 0) throw new Error(`${what} exited ${String(result.code ?? result.signal)}\n${result.stderr}${result.stdout}`);
  return result;
}

/** Runs a program fixture natively (x86_64) or under qemu-aarch64 -L sysroot (aarch64); throws unless it succeeds. */
export async function runProgram(f: Fixture, opts: RunOptions = {}): Promise<ExecResult> {
  if (f.kind === 'shared') throw new Error(`${f.id} is a shared library, not a program`);
  const path = opts.path ?? f.path;
  const libraryPath = opts.libraryPath === undefined ? f.libraryPath : opts.libraryPath;
  return succeeded(path, await runOn(f.arch, path, opts.args ?? [], programVars(libraryPath, opts.env)));
}

export interface LdListOptions {
  libraryPath?: string | null;
  env?: Record<string, string>;
}

/**
 * `ld.so --list FILE` with the loader of the architecture (x86_64: the host's
 * /lib64/ld-linux-x86-64.so.2; aarch64: the sysroot's, under qemu). Returns stdout; throws
 * when the loader fails (a dependency not found, a malformed file).
 */
export async function ldList(file: string, arch: Arch, opts: LdListOptions = {}): Promise<string> {
  const result = succeeded(`ld.so --list ${file}`, await listDependencies(file, arch, opts.libraryPath, opts.env));
  if (/=> not found|cannot open shared object/.test(result.stdout + result.stderr)) {
    throw new Error(`ld.so --list ${file}: missing dependency\n${result.stdout}${result.stderr}`);
  }
  return result.stdout;
}

/** ldList for a fixture, with its libraryPath. */
export async function ldListFixture(f: Fixture, opts: LdListOptions = {}): Promise<string> {
  return ldList(f.path, f.arch, { libraryPath: f.libraryPath, ...opts });
}

/**
 * dlopen()s the files with RTLD_NOW in the compiled dlopen-probe of the architecture (every
 * symbol bound, constructors run): a stronger check than ldList. Returns stdout.
 */
export async function dlopenProbe(files: string | string[], arch: Arch, opts: LdListOptions = {}): Promise<string> {
  if (arch !== 'x86_64' && arch !== 'aarch64') throw new Error(`dlopenProbe: cannot run ${arch} code on this machine`);
  const probeId = arch === 'x86_64' ? 'compiled/x86_64/dlopen-probe' : 'compiled/aarch64-64k/dlopen-probe';
  const list = typeof files === 'string' ? [files] : files;
  const { stdout } = await runProgram(fixture(probeId), { args: list, libraryPath: opts.libraryPath ?? null, env: opts.env ?? {} });
  return stdout;
}

/** The compiled fixtures of every variant that are not linked by GNU ld from C: linked by lld and gold, and C++. */
export const OTHER_TOOLCHAIN_FIXTURES = [
  'libuser-runpath-lld',
  'pie-runpath-lld',
  'libuser-runpath-gold',
  'pie-runpath-gold',
  'cxx-throw',
  'cxx-throw-lib',
] as const;

/** The compiled variants fixtures/build.sh makes separateDebugInfo outputs of (cache debug-info/<variant>). */
export const DEBUG_INFO_VARIANTS = ['x86_64', 'aarch64-64k', 'arm', 'ppc64'] as const;
export type DebugInfoVariant = (typeof DEBUG_INFO_VARIANTS)[number];

export interface DebugInfoFile {
  /** Absolute path of the debug file. */
  path: string;
  /** The file of the output tree (out/) it was made from. */
  source: string;
  /** `objcopy --only-keep-debug` (Nixpkgs' separateDebugInfo) or `eu-strip -f` (RPM's debuginfo). */
  tool: 'objcopy' | 'eu-strip';
}

export interface DebugInfoTree {
  /** Holds out/ (an output), debug/ (its debug output: lib/debug/.build-id/xx/yyyy.debug) and eu-strip/. */
  root: string;
  files: DebugInfoFile[];
}

/** A variant's output and debug output, from the list fixtures/build.sh writes beside them. */
export function debugInfoTree(variant: DebugInfoVariant): DebugInfoTree {
  const root = join(CACHE_DIR, 'debug-info', variant);
  const list = join(root, 'debug-files.tsv');
  if (!existsSync(list)) throw new Error(`${list} not found: run bash fixtures/build.sh (the vitest global setup does)`);
  const files = readFileSync(list, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line): DebugInfoFile => {
      const [debug, source, tool] = line.split('\t');
      if (debug === undefined || source === undefined || (tool !== 'objcopy' && tool !== 'eu-strip'))
        throw new Error(`${list}: cannot read the line "${line}"`);
      return { path: join(root, debug), source: join(root, source), tool };
    });
  return { root, files };
}
