// A file that another process writes while it is read can show a mix of its old and new bytes: a
// program header table that points past the size the file had when it was opened, a string table
// cut short. Such a read fails as a format error that blames the file, or gives a plan that would not
// read back (refused as unsupported). When the file is no longer
// the one that was opened (inode, size or mtime), that failure is reported as what it is: a change.

import { stat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { sameFile } from '../write/same-file.js';

/** A `changed` error when the file at `path` is not the one `opened` describes; null when it is. */
export async function changedWhileRead(path: string, opened: Stats): Promise<CudaPatchelfError | null> {
  const now = await stat(path).catch(() => null);
  if (now !== null && sameFile(now, opened)) return null;
  return new CudaPatchelfError('changed', 'the file changed on disk while it was being read; left alone', { file: path });
}
