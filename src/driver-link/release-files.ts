// The files of one driver release. NVIDIA names each user-space library of a driver release with the
// release's full version (libcuda.so.580.159.04, libnvidia-ml.so.580.159.04, libnvidia-nvvm.so.580.159.04
// …) and links its soname (libcuda.so.1) to that file, and a compat package does the same for its own
// version: the files of a release are the libraries whose real names end in .so.VERSION.

import { readdirSync, realpathSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { ioError } from '../errors/io-error.js';

const LIBCUDA = 'libcuda.so.';

/** Whether a library file name is of release `version`: lib….so.VERSION. */
export function isReleaseFile(name: string, version: string): boolean {
  const suffix = `.so.${version}`;
  return name.startsWith('lib') && name.endsWith(suffix) && name.length > 'lib'.length + suffix.length;
}

/** libcuda first (the library everything else is there for), then by name. */
export function inReleaseOrder(files: Iterable<string>): string[] {
  const rank = (file: string): number => (basename(file).startsWith(LIBCUDA) ? 0 : 1);
  return [...new Set(files)].sort((a, b) => rank(a) - rank(b) || (basename(a) < basename(b) ? -1 : basename(a) > basename(b) ? 1 : 0));
}

/** The real path of `path` when it is a regular file (links followed), else null. */
export function realFile(path: string): string | null {
  try {
    const real = realpathSync(path);
    return statSync(real).isFile() ? real : null;
  } catch {
    return null;
  }
}

/** The names in `dir`; an io error naming it when it cannot be listed. */
export function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch (error) {
    throw ioError(dir, 'list the directory', error);
  }
}

/** The regular files of `dir` (links followed) whose real names are of release `version`, libcuda first. */
export function releaseFilesIn(dir: string, version: string): string[] {
  const files = namesIn(dir).flatMap((name) => {
    const real = realFile(join(dir, name));
    return real !== null && isReleaseFile(basename(real), version) ? [real] : [];
  });
  return inReleaseOrder(files);
}
