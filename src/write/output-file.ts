// --output: the input copied to a regular file, which the plan is then written to. As patchelf writes
// its output file: a new file gets mode 0777 less the umask (the input's mode, set-user-ID bit and all,
// is not copied), and an existing one keeps its mode and inode, truncated and written anew. Anything
// else is refused before a byte is written: a device, FIFO or socket takes no positional writes, and
// what is not ours is never removed (Node's copyFile deletes its destination when the copy fails, a
// device node included).

import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, rmSync, statSync, writeSync, type Stats } from 'node:fs';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { describeFileType, ioError } from '../errors/io-error.js';

const CHUNK = 1 << 20;

function notRegular(output: string, stats: Stats): CudaPatchelfError {
  return new CudaPatchelfError('io', `the output file is ${describeFileType(stats)}: --output names a regular file or a new one; left alone`, { file: output });
}

/** The output's stats, following links; null where nothing is there. */
function existingOutput(output: string): Stats | null {
  try {
    return statSync(output, { throwIfNoEntry: false }) ?? null;
  } catch (error) {
    throw ioError(output, 'stat the output file', error);
  }
}

/** Whether `output` is the file `input` describes (patchelf's `--output` may name its input): then there is nothing to copy. */
export function outputIsInput(output: string, input: Pick<Stats, 'dev' | 'ino'>): boolean {
  const stats = existingOutput(output);
  return stats !== null && stats.dev === input.dev && stats.ino === input.ino;
}

/**
 * Copies `input` to `output`, a regular file or a new one; true when this made the file (then a copy
 * that fails is removed; a file that was there, or a link's target, is left as the failure left it).
 */
export function copyToOutput(input: string, output: string): boolean {
  const existing = existingOutput(output);
  if (existing !== null && !existing.isFile()) throw notRegular(output, existing);
  let created = false;
  try {
    created = lstatSync(output, { throwIfNoEntry: false }) === undefined;
  } catch (error) {
    throw ioError(output, 'stat the output file', error);
  }
  let source: number;
  try {
    source = openSync(input, 'r');
  } catch (error) {
    throw ioError(input, 'open', error);
  }
  try {
    let target: number;
    try {
      // O_NONBLOCK: a FIFO put there since the check fails the open or the check below instead of waiting for a reader.
      target = openSync(output, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NONBLOCK, 0o777);
    } catch (error) {
      throw ioError(output, 'open the output file', error);
    }
    try {
      const stats = fstatSync(target);
      if (!stats.isFile()) throw notRegular(output, stats);
      copyBytes(source, target, output);
    } catch (error) {
      if (created) rmSync(output, { force: true });
      throw error;
    } finally {
      closeSync(target);
    }
  } finally {
    closeSync(source);
  }
  return created;
}

function copyBytes(source: number, target: number, output: string): void {
  const buffer = Buffer.allocUnsafe(CHUNK);
  try {
    for (let position = 0; ; ) {
      const length = readSync(source, buffer, 0, CHUNK, position);
      if (length === 0) return;
      for (let written = 0; written < length; ) written += writeSync(target, buffer, written, length - written, position + written);
      position += length;
    }
  } catch (error) {
    throw ioError(output, 'write the output file', error);
  }
}
