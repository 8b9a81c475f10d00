// Which runpath entries a run of the hooks puts behind the driver's directory although the file had them
// before it (or had no driver entry at all). When such a directory holds a libcuda.so.1 of its own, as
// cuda_compat's does, the loader now finds the driver's first: a driver-only `apply` over a tree patched
// with --cuda-compat demotes cuda_compat this way, as Nixpkgs' hook sequence does. Stub directories are
// not counted: the driver belongs ahead of them. Whether a directory holds a libcuda.so.1 is for the
// caller to find out: nothing here touches the disk.

import type { ByteString } from '../elf/byte-string.js';
import { runpathFields } from '../elf/runpath-list.js';
import { BUILTIN_DRIVER_HOOK_NAMES } from './builtin-hooks.js';
import type { Hook, TracedEntry } from './hook.js';
import { normalizeRunpathEntry } from './runpath-entry.js';
import { NIXPKGS_STUBS_PATTERNS, stubsMatcher } from './stubs-pattern.js';

const isNixpkgsStubs = stubsMatcher(NIXPKGS_STUBS_PATTERNS);

/** Link-time stubs (some ship a libcuda.so.1 too): a `stubs` directory, or what Nixpkgs' stubs hook matches. */
function isStubsDirectory(dir: ByteString): boolean {
  return dir.split('/').includes('stubs') || isNixpkgsStubs(dir);
}

/** Every spelling of the driver's directory the hooks may add (the driver hook's and the stubs replacement's, per machine too). */
export function driverDirectories(hooks: readonly Hook[]): ReadonlySet<ByteString> {
  const dirs = new Set<ByteString>();
  for (const hook of hooks) {
    if (!BUILTIN_DRIVER_HOOK_NAMES.has(hook.name) || !('dirs' in hook.transform)) continue;
    for (const dir of [...hook.transform.dirs, ...[...(hook.machineDirs?.values() ?? [])].flat()]) dirs.add(normalizeRunpathEntry(dir));
  }
  return dirs;
}

/** The driver's directory that a run puts first, and the entries it puts behind it (one spelling each). */
export interface PutBehindDriver {
  readonly driver: ByteString;
  readonly behind: readonly ByteString[];
}

/**
 * The absolute entries, stub directories aside, that come after the first driver directory in `entries`
 * (the composed runpath) but came before every driver directory of `oldRunpath`, in the order they
 * appear; null when none did. `spell` brings an entry to one spelling (normalizeRunpathEntry; a caller
 * going over a whole tree passes it memoised: the same entries come back in file after file).
 */
export function entriesPutBehindDriver(
  oldRunpath: ByteString | null,
  entries: readonly TracedEntry[],
  driverDirs: ReadonlySet<ByteString>,
  spell: (entry: ByteString) => ByteString = normalizeRunpathEntry,
): PutBehindDriver | null {
  const composed = entries.map((entry) => spell(entry.dir));
  const driverAt = composed.findIndex((dir) => driverDirs.has(dir));
  const driver = composed[driverAt];
  if (driver === undefined) return null;
  const old = runpathFields(oldRunpath).map(spell);
  const oldDriverAt = old.findIndex((dir) => driverDirs.has(dir));
  const aheadOfDriver = new Set(oldDriverAt < 0 ? old : old.slice(0, oldDriverAt));
  const behind = composed
    .slice(driverAt + 1)
    .filter((dir) => aheadOfDriver.has(dir) && dir.startsWith('/') && !driverDirs.has(dir) && !isStubsDirectory(dir));
  return behind.length === 0 ? null : { driver, behind: [...new Set(behind)] };
}
