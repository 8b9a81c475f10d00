// A file that another process writes while apply reads it can show a mix of its old and new bytes: a
// program header table that points past the size the file had when it was opened, a string table
// cut short, zeros where a truncation caught a read in flight. Whatever the read then fails with (a
// format error, a plan refused as unsupported, an io error, or an internal error on bytes no valid
// file has), when the file is not the one apply listed and opened, that failure is reported as what
// it is: a change.
//
// The change can come before the open, too: the walk lists a file with its size and the file is
// opened later, and a file cut in between reads consistently, as the shorter file it now is, and fails
// as a malformed one. So the size the walk saw counts as well as the inode, size and mtime at the
// open. What no stat can show is a change that keeps the size and falls in the same tick of the file
// system's clock as the open (the kernel's coarse clock: a few milliseconds): that read failure is
// reported as it is.

import { stat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { sameFile } from '../write/same-file.js';

/**
 * A `changed` error, caused by `failure`, when the file at `path` is not the one the walk listed with
 * `listedSize` bytes and `opened` describes; null when it is.
 */
export async function changedWhileRead(path: string, listedSize: number, opened: Stats, failure: unknown): Promise<CudaPatchelfError | null> {
  const now = await stat(path).catch(() => null);
  if (listedSize === opened.size && now !== null && sameFile(now, opened)) return null;
  const sizes = `${listedSize} bytes when listed, ${opened.size} when opened, ${now === null ? 'gone' : `${now.size}`} after the read`;
  return new CudaPatchelfError('changed', `the file changed on disk while it was being read (${sizes}); left alone`, { file: path, cause: failure });
}
