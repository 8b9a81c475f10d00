// What the loader itself would load for a file, as ldd asks it (LD_TRACE_LOADED_OBJECTS=1: every
// library listed, `not found` for one it cannot find, and it goes on), and which object asked for each
// library first (LD_DEBUG=files: the first requester decides which copy the whole process gets): the
// host's ld.so for x86_64 files, the fixtures' arm64 sysroot's under qemu-aarch64 for aarch64 files (as
// bench/closure-audit.ts does), no LD_LIBRARY_PATH. Files of other machines are not listed.
//
// A dlopen by name searches the calling object's runpath as its DT_NEEDED entries are searched; the
// probe asks the loader that question for a runpath: a stub shared object with that runpath and the
// name as its only DT_NEEDED entry, written by patchelf 0.14.3 (neither side's writer of the runpath).

import { execFile } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { AP_CACHE, patchelfPathDir } from './cases.js';

const FIXTURES = process.env.CUDA_PATCHELF_FIXTURES_CACHE ?? join(import.meta.dirname, '..', '..', 'fixtures', '.cache');
const ARM64_SYSROOT = join(FIXTURES, 'sysroot-arm64');
const ARM64_LOADER = join(ARM64_SYSROOT, 'lib', 'ld-linux-aarch64.so.1');
const TIMEOUT_MS = 120_000;
const run = promisify(execFile);

export interface LoaderListing {
  /** The loader's exit code, or how it ended without one (`timed out`, a signal). */
  readonly exit: number | string;
  /** Each library it listed -> the real path it loads it from, or null: not found. */
  readonly libraries: ReadonlyMap<string, string | null>;
  /** Each library it looked for -> the real path of the object that asked for it first. */
  readonly requesters: ReadonlyMap<string, string>;
}

/** Exit 0 and every library found. */
export const loadsFully = (listing: LoaderListing): boolean =>
  listing.exit === 0 && [...listing.libraries.values()].every((path) => path !== null);

/** A path by its real path, so that a link and its target, or a cache reached through a link, compare equal. */
function realPath(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}

function parseListing(stdout: string): Map<string, string | null> {
  const libraries = new Map<string, string | null>();
  for (const line of stdout.split('\n')) {
    const m = /^\s+(\S+) => (?:not found|(\S.*?) \(0x[0-9a-f]+\))$/.exec(line);
    if (m !== null) libraries.set(m[1] as string, m[2] === undefined ? null : realPath(m[2]));
  }
  return libraries;
}

/** LD_DEBUG=files: `file=NAME [0];  needed by REQUESTER [0]`, the first time a name is looked for. */
function parseRequesters(stderr: string): Map<string, string> {
  const requesters = new Map<string, string>();
  for (const line of stderr.split('\n')) {
    const m = /\sfile=(\S+) \[\d+\];\s+needed by (.+) \[\d+\]$/.exec(line);
    if (m !== null && !requesters.has(m[1] as string)) requesters.set(m[1] as string, realPath(m[2] as string));
  }
  return requesters;
}

/** readelf's machine names this lists files of. */
const LISTED_MACHINES = new Set(['Advanced Micro Devices X86-64', 'AArch64']);

export function listLoaded(file: string, machine: string): Promise<LoaderListing | null> {
  if (!LISTED_MACHINES.has(machine)) return Promise.resolve(null);
  // qemu sets the variables for the emulated loader, not for itself.
  const trace = { LD_TRACE_LOADED_OBJECTS: '1', LD_DEBUG: 'files' };
  const [command, args, env]: [string, string[], Record<string, string>] =
    machine === 'AArch64'
      ? [
          '/usr/bin/qemu-aarch64',
          ['-L', ARM64_SYSROOT, ...Object.entries(trace).flatMap(([k, v]) => ['-E', `${k}=${v}`]), ARM64_LOADER, file],
          {},
        ]
      : ['/lib64/ld-linux-x86-64.so.2', [file], trace];
  return new Promise((done, fail) => {
    const options = { env: { PATH: '/usr/bin:/bin', LC_ALL: 'C', ...env }, maxBuffer: 64 * 2 ** 20, timeout: TIMEOUT_MS };
    execFile(command, args, options, (error, stdout, stderr) => {
      const listing = (exit: number): LoaderListing => ({ exit, libraries: parseListing(stdout), requesters: parseRequesters(stderr) });
      if (error === null) return done(listing(0));
      if (typeof error.code === 'number') return done(listing(error.code));
      if (error.killed || error.signal)
        return done({ exit: error.killed ? 'timed out' : String(error.signal), libraries: new Map(), requesters: new Map() });
      fail(error);
    });
  });
}

const STUB_COMPILERS: Readonly<Record<string, string>> = { 'Advanced Micro Devices X86-64': 'gcc', AArch64: 'aarch64-linux-gnu-gcc' };
const stubs = new Map<string, Promise<string>>();

/** An empty shared object of the machine, built once per run. */
function stubFor(machine: string): Promise<string> {
  let stub = stubs.get(machine);
  if (stub === undefined) {
    const compiler = STUB_COMPILERS[machine];
    if (compiler === undefined) throw new Error(`no probe stub for ${machine}`);
    const path = join(AP_CACHE, 'probe', `${compiler}.so`);
    stub = mkdir(join(AP_CACHE, 'probe'), { recursive: true })
      .then(() => run(compiler, ['-shared', '-nostdlib', '-o', path, '-x', 'c', '/dev/null']))
      .then(() => path);
    stubs.set(machine, stub);
  }
  return stub;
}

/**
 * The real path of the file the loader takes `name` from for an object of `machine` whose search list
 * is `runpath` (`$ORIGIN` already expanded): what a dlopen of the name by that object opens (DT_RPATH
 * and DT_RUNPATH search an object's own list alike when it is the only one). Null: not found.
 */
export async function probeLookup(name: string, runpath: string, machine: string): Promise<string | null> {
  const dir = await mkdtemp(join(tmpdir(), 'cuda-patchelf-probe-'));
  try {
    const probe = join(dir, 'probe.so');
    await copyFile(await stubFor(machine), probe);
    // patchelf 0.14.3 writes a wrong runpath when both are asked in one call: two calls.
    const patchelf = join(patchelfPathDir('0.14.3'), 'patchelf');
    await run(patchelf, ['--add-needed', name, probe]);
    await run(patchelf, ['--set-rpath', runpath, probe]);
    const listing = await listLoaded(probe, machine);
    return listing?.libraries.get(name) ?? null;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
