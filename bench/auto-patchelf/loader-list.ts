// What the loader itself would load for a file, as ldd asks it (LD_TRACE_LOADED_OBJECTS=1: every
// library listed, `not found` for one it cannot find, and it goes on): the host's ld.so for x86_64
// files, the fixtures' arm64 sysroot's under qemu-aarch64 for aarch64 files (as bench/closure-audit.ts
// does), no LD_LIBRARY_PATH. Files of other machines are not listed.

import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';

const FIXTURES = process.env.CUDA_PATCHELF_FIXTURES_CACHE ?? join(import.meta.dirname, '..', '..', 'fixtures', '.cache');
const ARM64_SYSROOT = join(FIXTURES, 'sysroot-arm64');
const ARM64_LOADER = join(ARM64_SYSROOT, 'lib', 'ld-linux-aarch64.so.1');
const TIMEOUT_MS = 120_000;

export interface LoaderListing {
  /** The loader's exit code, or how it ended without one (`timed out`, a signal). */
  readonly exit: number | string;
  /** Each library it listed -> the path it loads it from, or null: not found. */
  readonly libraries: ReadonlyMap<string, string | null>;
}

/** Exit 0 and every library found. */
export const loadsFully = (listing: LoaderListing): boolean =>
  listing.exit === 0 && [...listing.libraries.values()].every((path) => path !== null);

function parseListing(stdout: string): Map<string, string | null> {
  const libraries = new Map<string, string | null>();
  for (const line of stdout.split('\n')) {
    const m = /^\s+(\S+) => (?:not found|(\S.*?) \(0x[0-9a-f]+\))$/.exec(line);
    if (m !== null) libraries.set(m[1] as string, m[2] === undefined ? null : resolve(m[2]));
  }
  return libraries;
}

/** readelf's machine names this lists files of. */
const LISTED_MACHINES = new Set(['Advanced Micro Devices X86-64', 'AArch64']);

export function listLoaded(file: string, machine: string): Promise<LoaderListing | null> {
  if (!LISTED_MACHINES.has(machine)) return Promise.resolve(null);
  // qemu sets the variable for the emulated loader, not for itself.
  const [command, args, env]: [string, string[], Record<string, string>] =
    machine === 'AArch64'
      ? ['/usr/bin/qemu-aarch64', ['-L', ARM64_SYSROOT, '-E', 'LD_TRACE_LOADED_OBJECTS=1', ARM64_LOADER, file], {}]
      : ['/lib64/ld-linux-x86-64.so.2', [file], { LD_TRACE_LOADED_OBJECTS: '1' }];
  return new Promise((done, fail) => {
    const options = { env: { PATH: '/usr/bin:/bin', LC_ALL: 'C', ...env }, maxBuffer: 64 * 2 ** 20, timeout: TIMEOUT_MS };
    execFile(command, args, options, (error, stdout) => {
      if (error === null) return done({ exit: 0, libraries: parseListing(stdout) });
      if (typeof error.code === 'number') return done({ exit: error.code, libraries: parseListing(stdout) });
      if (error.killed || error.signal) return done({ exit: error.killed ? 'timed out' : String(error.signal), libraries: new Map() });
      fail(error);
    });
  });
}
