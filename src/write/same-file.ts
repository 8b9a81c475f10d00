// Whether a file is still the one that was read: same inode, size and modification time. Every
// write checks it against what planning saw, so that a file another process replaced or changed
// meanwhile is refused instead of patched with a plan made for other bytes.

import type { Stats } from 'node:fs';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';

export function sameFile(a: Stats, b: Stats): boolean {
  return a.ino === b.ino && a.dev === b.dev && a.size === b.size && a.mtimeMs === b.mtimeMs;
}

/** The refusal of a file that changed between planning and writing. */
export function changedSincePlanned(path: string): CudaPatchelfError {
  return new CudaPatchelfError('changed', 'the file changed on disk while it was being planned; left alone', { file: path });
}
