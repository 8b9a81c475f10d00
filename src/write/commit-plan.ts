// Committing a plan to a path (commitPlan): to --output's file (output-file.ts), or to the file itself
// under the per-file lock, where writeIfUnchanged opens it and checks it is the one planned for: a
// read-only one is opened up for the write (--make-writable) and its mode put back, and the plan's
// writes go at their offsets in their order (write-at-offsets.ts), or the whole-file rewrite makes the
// new file and renames it over the old one.

import { closeSync, fstatSync, openSync, statSync, type Stats } from 'node:fs';
import { chmod } from 'node:fs/promises';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { ioError } from '../errors/io-error.js';
import type { Plan } from '../plan/plan.js';
import { writeAtOffsets } from './write-at-offsets.js';
import { lockName, takeLock } from './file-lock.js';
import { outputIsInput, writeOutput } from './output-file.js';
import { rewriteFile } from './rewrite-file.js';
import { changedSincePlanned, sameFile } from './same-file.js';
import { isReadOnly, readOnlyRefusal, readOnlyRefusalOf } from './write-refusal.js';

export interface WriteOptions {
  /** fsync between the data and the header writes. */
  readonly durable?: boolean;
  /** Write files without write permission (the mode is restored afterwards). */
  readonly makeWritable?: boolean;
}

export interface CommitOptions extends WriteOptions {
  /** Write the result to this file and leave the input alone. */
  readonly output?: string;
}

/** What committing a plan did: the bytes written, or the error that stopped it (naming the file; the file is left valid). */
export type WriteResult =
  | { readonly kind: 'written'; readonly bytes: number }
  | { readonly kind: 'failed'; readonly error: CudaPatchelfError };

/**
 * Writes a plan made from the file at `path`, which `planned` describes as it was read; returns the
 * bytes written, or the error that stopped the write as a value (only a bug is thrown). With `output`, the input's bytes and the plan's writes go there and the input is left
 * as it is (output-file.ts), unless `output` names the input itself. Otherwise a noop writes nothing,
 * not even the timestamp, and any other plan is written under the file lock, where writeIfUnchanged's check
 * sees a write another cuda-patchelf made since this one read the file.
 */
export async function commitPlan(path: string, plan: Plan, planned: Stats, options: CommitOptions): Promise<WriteResult> {
  try {
    return { kind: 'written', bytes: await commitOrThrow(path, plan, planned, options) };
  } catch (error) {
    if (!(error instanceof CudaPatchelfError)) throw error;
    return { kind: 'failed', error: error.withFile(path) };
  }
}

async function commitOrThrow(path: string, plan: Plan, planned: Stats, options: CommitOptions): Promise<number> {
  if (options.output !== undefined && !outputIsInput(options.output, planned)) {
    return writeOutput(path, options.output, { plan, planned, ...(options.durable === undefined ? {} : { durable: options.durable }) });
  }
  if (plan.tier === 'noop') return 0;
  const lock = await takeLock(lockName(planned), path);
  // Without the lock (the system will not bind its socket) the file is written all the same: writeIfUnchanged's
  // check still refuses a file that changed since it was planned, and only the gap after it is open.
  try {
    return await writeIfUnchanged(path, plan, planned, options);
  } finally {
    if (lock.kind === 'locked') lock.release();
  }
}

/**
 * Opens the file for writing and checks it is still the file that was planned for (same inode, size
 * and mtime), then writes the plan into it. Root can write anything, so the mode is checked here.
 */
export async function writeIfUnchanged(path: string, plan: Plan, planned: Stats, options: WriteOptions): Promise<number> {
  // A rewrite makes a new file with the old one's mode: the old one is never opened for writing.
  if (plan.tier === 'rewrite') {
    const refusal = readOnlyRefusalOf(path, statOrThrow(path).mode, options.makeWritable === true);
    if (refusal !== null) throw refusal;
    return rewriteFile(path, plan, planned, options);
  }
  const { fd, modeToRestore } = await openForWriting(path, options.makeWritable === true);
  try {
    const stats = fstatOrThrow(path, fd);
    // Root opens a file without write permission: its mode says it is read-only.
    const refusal = readOnlyRefusalOf(path, stats.mode, options.makeWritable === true);
    if (refusal !== null) throw refusal;
    if (!sameFile(stats, planned)) throw changedSincePlanned(path);
    try {
      return writeAtOffsets(fd, plan, options.durable === undefined ? {} : { durable: options.durable });
    } catch (error) {
      throw ioError(path, 'write', error);
    }
  } finally {
    closeSync(fd);
    if (modeToRestore !== null) await chmodOrThrow(path, modeToRestore);
  }
}

/**
 * Opens the file read-write, with no stat of the path first. Without root, a file without write
 * permission fails the open with EACCES: it is refused, or opened up for the write (`makeWritable`),
 * and `modeToRestore` is its mode, to put back afterwards.
 */
async function openForWriting(path: string, makeWritable: boolean): Promise<{ fd: number; modeToRestore: number | null }> {
  try {
    return { fd: openSync(path, 'r+'), modeToRestore: null };
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EACCES') throw ioError(path, 'open for writing', error);
    const before = statOrThrow(path);
    if (!isReadOnly(before.mode)) throw ioError(path, 'open for writing', error);
    if (!makeWritable) throw readOnlyRefusal(path, before.mode);
    await chmodOrThrow(path, before.mode | 0o200);
    try {
      return { fd: openSync(path, 'r+'), modeToRestore: before.mode };
    } catch (reopenError) {
      await chmodOrThrow(path, before.mode);
      throw ioError(path, 'open for writing', reopenError);
    }
  }
}

function fstatOrThrow(path: string, fd: number): Stats {
  try {
    return fstatSync(fd);
  } catch (error) {
    throw ioError(path, 'stat', error);
  }
}

function statOrThrow(path: string): Stats {
  try {
    return statSync(path);
  } catch (error) {
    throw ioError(path, 'stat', error);
  }
}

async function chmodOrThrow(path: string, mode: number): Promise<void> {
  try {
    await chmod(path, mode & 0o7777);
  } catch (error) {
    throw ioError(path, 'change the mode of', error);
  }
}
