// A file that another process writes while apply reads it can show a mix of its old and new bytes: a
// program header table that points past the size the file had when it was opened, a string table
// cut short, zeros where a truncation caught a read in flight. Whatever the read then fails with (a
// format error, a plan refused as unsupported, an io error, or an internal error on bytes no valid
// file has), when the file is no longer the one apply took the stat of, that failure is reported as what
// it is: a change.
//
// That stat is taken once the first block shows an ELF file (FileHead.openWalked, then statNow: the walk lists
// files without a stat). A change before then is not told apart: a file cut before apply read it reads
// consistently, as the shorter file it now is, and fails as the malformed file it is. Nor is a change
// that keeps the size and falls in the same tick of the file system's clock as the stat (the kernel's
// coarse clock: a few milliseconds): that read failure is reported as it is.

import { stat } from 'node:fs/promises';
import type { Stats } from 'node:fs';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { sameFile } from '../write/same-file.js';

/**
 * A `changed` error, caused by `failure`, when the file at `path` is not the one `opened` describes
 * (its stat once opened); null when it is, or when the failure came before that stat was taken.
 */
export async function changedWhileRead(path: string, opened: Stats | null, failure: unknown): Promise<CudaPatchelfError | null> {
  if (opened === null) return null;
  const now = await stat(path).catch(() => null);
  if (now !== null && sameFile(now, opened)) return null;
  const sizes = `${opened.size} bytes when opened, ${now === null ? 'gone' : `${now.size}`} after the read`;
  return new CudaPatchelfError('changed', `the file changed on disk while it was being read (${sizes}); left alone`, {
    file: path,
    cause: failure,
  });
}
