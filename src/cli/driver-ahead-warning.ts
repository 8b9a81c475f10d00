// The warning of apply, check and plan when a run puts the driver's directory ahead of a directory that
// holds a libcuda.so.1 of its own (cuda_compat's) and that came first in the file: the loader would then
// find the driver's libcuda instead. Which entries moved behind the driver is hooks/ (pure); whether such
// an entry holds a libcuda.so.1 is asked of the file system here, once per distinct directory in a run.

import { statSync } from 'node:fs';
import type { FileOutcome } from '../batch/file-outcome.js';
import { asciiByteString, type ByteString, byteStringToBytes, byteStringToText, concatByteStrings } from '../elf/elf.js';
import { counted } from './report.js';
import { oneLine } from '../errors/cuda-patchelf-error.js';
import { driverDirectories, entriesPutBehindDriver } from '../hook-engine/driver-precedence.js';
import type { Hook, TracedEntry } from '../hook-engine/hook.js';
import { normalizeRunpathEntry } from '../hook-engine/runpath-entry.js';

const LIBCUDA_IN_DIRECTORY = asciiByteString('/libcuda.so.1');

/** A regular file (through links, as the loader opens it) named libcuda.so.1 in the directory, a byte string. */
function holdsLibcuda(dir: ByteString): boolean {
  try {
    return statSync(byteStringToBytes(concatByteStrings(dir, LIBCUDA_IN_DIRECTORY))).isFile();
  } catch {
    return false;
  }
}

/** `cache`'s value for `key`, computed the first time it is asked for. */
function memoizedIn<K, T>(cache: Map<K, T>, key: K, compute: () => T): T {
  if (cache.has(key)) return cache.get(key) as T;
  const value = compute();
  cache.set(key, value);
  return value;
}

function memoized<K, T>(compute: (key: K) => T): (key: K) => T {
  const cache = new Map<K, T>();
  return (key) => memoizedIn(cache, key, () => compute(key));
}

/** The driver's directory a file gets first, and the directory with a libcuda.so.1 that it now precedes. */
interface Demotion {
  readonly driver: ByteString;
  readonly dir: ByteString;
}

/**
 * One line for stderr, or null: how many files (patched, or to patch in a dry run) get the driver's
 * directory ahead of such a directory, and the first of them (outcomes come sorted by path) as the example.
 */
export function driverAheadWarning(
  command: string,
  outcomes: readonly FileOutcome[],
  hooks: readonly Hook[],
  dryRun: boolean,
): string | null {
  const driverDirs = driverDirectories(hooks);
  if (driverDirs.size === 0) return null;
  // Per run, once per distinct entry and per distinct change of runpath: a tree repeats the same few
  // entries in file after file, and many of its files go from the same runpath to the same.
  const holds = memoized(holdsLibcuda);
  const spell = memoized(normalizeRunpathEntry);
  const demotions = new Map<string, Demotion | null>();
  const demotionOf = (oldRunpath: ByteString | null, newRunpath: ByteString, entries: readonly TracedEntry[]): Demotion | null =>
    memoizedIn(demotions, `${oldRunpath ?? ''}\0${newRunpath}`, () => {
      const moved = entriesPutBehindDriver(oldRunpath, entries, driverDirs, spell);
      const dir = moved?.behind.find(holds);
      return moved === null || dir === undefined ? null : { driver: moved.driver, dir };
    });
  let files = 0;
  let example: (Demotion & { path: string }) | null = null;
  for (const outcome of outcomes) {
    if (outcome.status !== 'patched') continue;
    const demotion = demotionOf(outcome.oldRunpath, outcome.newRunpath, outcome.entries);
    if (demotion === null) continue;
    files++;
    example ??= { path: outcome.path, ...demotion };
  }
  if (example === null) return null;
  const dir = oneLine(byteStringToText(example.dir));
  const keep = dir.endsWith('/compat') ? `give --cuda-compat ${dir.slice(0, -'/compat'.length)} to keep it first, or ` : '';
  return (
    `cuda-patchelf ${command}: warning: ${counted(files, 'file')} ${dryRun ? 'would get' : 'got'} the driver's directory ` +
    "ahead of a directory that came first and holds a libcuda.so.1 of its own, as cuda_compat's does, " +
    `e.g. ${oneLine(example.path)}: ${oneLine(byteStringToText(example.driver))} before ${dir}; ` +
    `${keep}--drop-cuda-compat to take it out`
  );
}
