// The refusals a write meets before its first byte, in one place: `apply` checks them as it writes
// (a refused file fails), and `plan`, `check` and `apply --dry-run` check them on the file they read,
// to say which files apply would refuse, and why, without failing themselves: they write nothing.

import type { Stats } from 'node:fs';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { Tier } from '../plan/plan.js';

/** Whether a mode gives no one write permission: root could still write it, but the file means not to be. */
export function isReadOnly(mode: number): boolean {
  return (mode & 0o222) === 0;
}

export function readOnlyRefusal(path: string, mode: number): CudaPatchelfError {
  return new CudaPatchelfError('io', `read-only file (mode ${(mode & 0o7777).toString(8)}); pass --make-writable to edit it anyway`, {
    file: path,
  });
}

/** The refusal of a read-only file, unless `makeWritable`; null when it may be written. */
export function readOnlyRefusalOf(path: string, mode: number, makeWritable: boolean): CudaPatchelfError | null {
  return isReadOnly(mode) && !makeWritable ? readOnlyRefusal(path, mode) : null;
}

/** A rewrite makes a new inode: under one name it would leave the file's other names on the old one. */
export function splitsHardLinks(path: string, nlink: number): CudaPatchelfError {
  return new CudaPatchelfError(
    'unsupported',
    `the edit needs a whole-file rewrite, which would split the file's ${nlink} hard links; left alone`,
    { file: path },
  );
}

/** Why a write of this tier to the file `stats` describes would be refused; null when it would go ahead. */
export function writeRefusal(path: string, stats: Stats, tier: Tier, makeWritable: boolean): CudaPatchelfError | null {
  const readOnly = readOnlyRefusalOf(path, stats.mode, makeWritable);
  if (readOnly !== null) return readOnly;
  if (tier === 'rewrite' && stats.nlink > 1) return splitsHardLinks(path, stats.nlink);
  return null;
}
