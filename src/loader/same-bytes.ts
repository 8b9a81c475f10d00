// Whether two files of one size hold the same bytes: two copies of one library are one library to
// whoever asks which copy the loader takes (the batch's runpath order and proof, doctor's shadowing
// findings). Read a chunk of each at a time, positionally, and stopped at the first difference; the
// files are never held whole.

import { open } from 'node:fs/promises';

const CHUNK = 1024 * 1024;

/** Whether the files at `a` and `b`, both `size` bytes long as stat'ed, hold the same bytes; false when either cannot be read. */
export async function sameBytes(a: string, b: string, size: number): Promise<boolean> {
  const [first, second] = await Promise.all([open(a, 'r').catch(() => null), open(b, 'r').catch(() => null)]);
  try {
    if (first === null || second === null) return false;
    const left = Buffer.alloc(Math.min(CHUNK, size));
    const right = Buffer.alloc(left.length);
    for (let at = 0; at < size; at += CHUNK) {
      const length = Math.min(CHUNK, size - at);
      const [x, y] = await Promise.all([first.read(left, 0, length, at), second.read(right, 0, length, at)]);
      if (x.bytesRead !== length || y.bytesRead !== length || left.compare(right, 0, length, 0, length) !== 0) return false;
    }
    return true;
  } finally {
    await Promise.all([first?.close(), second?.close()]);
  }
}
