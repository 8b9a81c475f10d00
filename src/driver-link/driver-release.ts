// The NVIDIA driver's user-space libraries on the machine that runs the programs: its libcuda, found as
// the loader finds libcuda.so.1 through its cache (/etc/ld.so.cache, read in its binary format), or in
// the directories --from names; and every library of the same release beside it (libnvidia-ml,
// libnvidia-ptxjitcompiler, libnvidia-nvvm, libcudadebugger and the others, as they are installed).

import { endianness } from 'node:os';
import { basename, join } from 'node:path';
import { asciiByteString, byteStringToText, withFileByteSource } from '../elf/elf.js';
import type { DriverVersion } from '../doctor/driver-version.js';
import { driverVersionInName, liesInCompatDirectory } from '../doctor/libcuda-facts.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { readLdCache } from '../loader/ld-cache.js';
import { lookUpCache, type CacheLookupTarget } from '../loader/ld-cache-lookup.js';
import type { MachineAbi } from '../loader/machine-abi.js';
import { inReleaseOrder, isReleaseFile, namesIn, realFile } from './release-files.js';

export interface DriverRelease {
  /** The release, from its libcuda's name: 580.159.04. */
  readonly version: string;
  /** The real path of its libcuda.so.VERSION. */
  readonly libcuda: string;
  /** The real paths of its libraries, libcuda first. */
  readonly files: readonly string[];
  /** Where they were found: the cache file, or the --from directories. */
  readonly source: string;
}

export type ReleaseSearch = { readonly found: true; readonly release: DriverRelease } | { readonly found: false; readonly problem: string };

const LIBCUDA = 'libcuda.so.1';

/** Where glibc's loader on this machine reads its cache (ldconfig writes it there). */
export const LOADER_CACHE = '/etc/ld.so.cache';

/** The cache's plain entries of the machine's ABI: NVIDIA's libraries lie in no hwcaps subdirectory. */
function plainEntries(abi: MachineAbi): CacheLookupTarget {
  return {
    defaultFlags: abi.cacheFlags,
    acceptsFlags: abi.acceptsCacheFlags,
    glibcHwcapsPriority: () => 0,
    isaLevelSupported: () => true,
    acceptedHwcapBits: 0n,
    platformMask: 0n,
    platformBit: null,
  };
}

/** The release of the libcuda at `libcuda` (a real path), with its libraries among `files`. */
function releaseOf(libcuda: string, files: readonly string[], source: string): ReleaseSearch {
  const version = driverVersionInName(libcuda);
  if (version === null)
    return { found: false, problem: `the driver's ${LIBCUDA} is ${libcuda}, whose name gives no driver version (libcuda.so.X.Y.Z)` };
  const release = files.filter((file) => isReleaseFile(basename(file), version));
  return { found: true, release: { version, libcuda, files: inReleaseOrder([libcuda, ...release]), source } };
}

/** The driver the loader finds through the cache at `cachePath` for programs of `abi`. */
export async function driverInCache(cachePath: string, abi: MachineAbi): Promise<ReleaseSearch> {
  if (realFile(cachePath) === null)
    return {
      found: false,
      problem: `there is no loader cache at ${cachePath} to find the NVIDIA driver through; name its directory with --from`,
    };
  const cache = await withFileByteSource(cachePath, (source) => readLdCache(source, endianness() === 'LE'));
  const found = lookUpCache(cache, asciiByteString(LIBCUDA), plainEntries(abi));
  if (found === null)
    return {
      found: false,
      problem: `${cachePath} lists no ${LIBCUDA} for ${abi.name}: the NVIDIA driver is not installed (or ldconfig has not run since)`,
    };
  const libcuda = realFile(byteStringToText(found));
  if (libcuda === null)
    return { found: false, problem: `${cachePath} names ${byteStringToText(found)} for ${LIBCUDA}, which is not there (run ldconfig)` };
  // A compat directory put in the loader's configuration (as NVIDIA's container hook does) is no driver.
  // The compat note does not tell: the driver's own libcuda carries it too (libcuda-facts.ts).
  if (liesInCompatDirectory(byteStringToText(found), libcuda))
    return {
      found: false,
      problem:
        `${cachePath} names ${libcuda} for ${LIBCUDA}, a cuda_compat libcuda (it lies in a compat directory), not the ` +
        "driver's; name the driver's directory with --from",
    };
  const files = cache.entries.flatMap((entry) => {
    if (!abi.acceptsCacheFlags(entry.flags) || entry.glibcHwcaps !== null) return [];
    const real = realFile(byteStringToText(entry.value));
    return real === null ? [] : [real];
  });
  return releaseOf(libcuda, files, cachePath);
}

/**
 * The driver in the directories `dirs` (--from): the release its libcuda.so.1 links to, or the one
 * libcuda.so.X.Y.Z there when no link says; two releases and no link to tell them apart is a problem.
 */
export function driverInDirectories(dirs: readonly string[]): ReleaseSearch {
  const where = dirs.join(', ');
  const files = [...new Set(dirs.flatMap((dir) => namesIn(dir).flatMap((name) => realFile(join(dir, name)) ?? [])))];
  const versioned = (file: string): boolean => basename(file).startsWith('libcuda.so.') && driverVersionInName(file) !== null;
  const linked = new Set(dirs.flatMap((dir) => realFile(join(dir, LIBCUDA)) ?? []).filter(versioned));
  const libcudas = linked.size > 0 ? [...linked] : files.filter(versioned);
  const [libcuda] = libcudas;
  if (libcuda === undefined) return { found: false, problem: `no libcuda.so.X.Y.Z (the NVIDIA driver's libcuda) in ${where}` };
  if (libcudas.length > 1)
    return { found: false, problem: `libcudas of more than one driver release in ${where} (${libcudas.join(', ')}): name one` };
  return releaseOf(libcuda, files, where);
}

/**
 * The driver's release as the name of the libcuda that the loader's cache lists tells it, for a kernel
 * driver whose module says nothing (not loaded yet); null when the cache lists no driver, or cannot be
 * read (the version then stays unknown).
 */
export async function driverVersionInCache(cachePath: string, abi: MachineAbi): Promise<DriverVersion | null> {
  let search: ReleaseSearch;
  try {
    search = await driverInCache(cachePath, abi);
  } catch (error) {
    if (error instanceof CudaPatchelfError) return null;
    throw error;
  }
  return search.found ? { version: search.release.version, source: `the name of ${search.release.libcuda} (${cachePath})` } : null;
}
