// --output: what the plan makes of the input, written to a regular file, as patchelf writes its output
// file: a new file gets mode 0777 less the umask (the input's mode, set-user-ID bit and all, is not
// copied), and an existing one keeps its mode and inode, truncated and written anew (through a link to
// it, and also when the plan is the whole-file rewrite: the rewritten bytes go into that inode, with
// no temporary file). Anything else is refused before a byte is written: a device, FIFO or socket
// takes no positional writes, and what is not ours is never removed (Node's copyFile deletes its
// destination when the copy fails, a device node included). A symbolic link to nothing is refused
// too, as cp refuses to write through one: patchelf makes the link's target, wherever it points, and
// a link is how a file gets written where its writer never meant to. A write that fails leaves no
// part of a file: a file this run made is removed, and an existing one, whose old bytes went when it
// was opened, is left empty rather than holding the first part of an ELF file.

import { closeSync, constants, fstatSync, fsyncSync, ftruncateSync, lstatSync, openSync, rmSync, statSync, type Stats } from 'node:fs';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { describeFileType, ioError } from '../errors/io-error.js';
import type { Plan } from '../plan/plan.js';
import { writeAtOffsets } from './write-at-offsets.js';
import { copyShifted } from './rewrite-file.js';
import { changedSincePlanned, sameFile } from './same-file.js';

/** What to write besides the input's bytes: a plan made from the input as `planned` describes it. */
export interface OutputEdit {
  readonly plan: Plan;
  readonly planned: Stats;
  readonly durable?: boolean;
}

function notRegular(output: string, stats: Stats): CudaPatchelfError {
  return new CudaPatchelfError(
    'io',
    `the output file is ${describeFileType(stats)}: --output names a regular file or a new one; left alone`,
    { file: output },
  );
}

function linkToNothing(output: string): CudaPatchelfError {
  return new CudaPatchelfError(
    'io',
    'the output file is a symbolic link to nothing: --output names a regular file or a new one; left alone',
    { file: output },
  );
}

/** The output's stats, following links; null where nothing is there. A link to nothing is refused. */
function existingOutput(output: string): Stats | null {
  let stats: Stats | undefined;
  try {
    stats = statSync(output, { throwIfNoEntry: false }) ?? lstatSync(output, { throwIfNoEntry: false });
  } catch (error) {
    throw ioError(output, 'stat the output file', error);
  }
  if (stats?.isSymbolicLink() === true) throw linkToNothing(output);
  return stats ?? null;
}

/** Whether `output` is the file `input` describes (patchelf's `--output` may name its input): then it is edited in place. */
export function outputIsInput(output: string, input: Pick<Stats, 'dev' | 'ino'>): boolean {
  const stats = existingOutput(output);
  return stats !== null && stats.dev === input.dev && stats.ino === input.ino;
}

const OPEN_OUTPUT = constants.O_RDWR | constants.O_NONBLOCK;

/**
 * Opens the output for writing, emptied; `created` when this made the file. Only O_EXCL creates, and
 * O_EXCL fails on any name that is there, a link included: what is there is opened without O_CREAT,
 * so a link to nothing put there since the check fails the open instead of having its target made.
 * O_NONBLOCK: a FIFO put there since the check fails the open, or the caller's check on the
 * descriptor, instead of waiting for a reader.
 */
function openOutput(output: string): { fd: number; created: boolean } {
  try {
    try {
      return { fd: openSync(output, OPEN_OUTPUT | constants.O_CREAT | constants.O_EXCL, 0o777), created: true };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    return { fd: openSync(output, OPEN_OUTPUT | constants.O_TRUNC), created: false };
  } catch (error) {
    throw ioError(output, 'open the output file', error);
  }
}

/** An existing output whose write failed is left empty: its old bytes are gone, and part of an ELF file is worse than none. */
function emptyAfterFailure(fd: number): void {
  try {
    ftruncateSync(fd, 0);
  } catch {
    // The write's own error is the one reported; a file that cannot even be cut is left as it is.
  }
}

/**
 * Writes the input's bytes, and what `edit`'s plan makes of them, to `output`, a regular file or a new
 * one; returns the bytes the plan wrote (the whole new file for a rewrite). When the write fails, a
 * file this made is removed, and a file that was there (or a link's target) is left empty.
 */
export function writeOutput(input: string, output: string, edit: OutputEdit | null): number {
  const existing = existingOutput(output);
  if (existing !== null && !existing.isFile()) throw notRegular(output, existing);
  let source: number;
  try {
    source = openSync(input, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (error) {
    throw ioError(input, 'open', error);
  }
  try {
    const inputStats = fstatSync(source);
    if (edit !== null && !sameFile(inputStats, edit.planned)) throw changedSincePlanned(input);
    const { fd, created } = openOutput(output);
    try {
      const stats = fstatSync(fd);
      if (!stats.isFile()) throw notRegular(output, stats);
      const rewrite = edit?.plan.tier === 'rewrite';
      try {
        copyShifted(source, fd, inputStats.size, rewrite ? (edit?.plan.shift ?? 0) : 0);
        const written = edit === null ? 0 : writeAtOffsets(fd, edit.plan);
        // One sync at the end: no one reads the output before it is complete, so its phases need none
        // in between (as for the rewrite's temporary file).
        if (edit?.durable === true) fsyncSync(fd);
        return rewrite ? inputStats.size + written : written;
      } catch (error) {
        if (!created) emptyAfterFailure(fd);
        throw ioError(output, 'write the output file', error);
      }
    } catch (error) {
      if (created) rmSync(output, { force: true });
      throw error;
    } finally {
      closeSync(fd);
    }
  } finally {
    closeSync(source);
  }
}
