// Tier 4 on disk. The new file is made next to the old one under a temporary name — the old file's
// bytes copied behind the new first page, then the plan's writes — and renamed over it. Until the
// rename the old file is untouched; after it the new one is complete: a kill at any moment leaves one
// or the other (and at worst the temporary file, whose name says what it is). This tier alone copies
// the whole file; the copy goes through a fixed-size buffer.

import {
  closeSync,
  fchmodSync,
  fchownSync,
  fstatSync,
  fsyncSync,
  openSync,
  readSync,
  realpathSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
  type Stats,
} from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { ioError } from '../errors/io-error.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { Plan } from '../plan/plan.js';
import { rewriteTemporaryName } from '../walk/rewrite-temporary.js';
import { writeAtOffsets } from './write-at-offsets.js';
import { changedSincePlanned, sameFile } from './same-file.js';
import { splitsHardLinks } from './write-refusal.js';

const COPY_CHUNK = 1 << 20;

/** Copies all of `from` (of `size` bytes) into `to` at offset `shift`. */
export function copyShifted(from: number, to: number, size: number, shift: number): void {
  const buffer = new Uint8Array(Math.min(COPY_CHUNK, Math.max(size, 1)));
  for (let at = 0; at < size; ) {
    const read = readSync(from, buffer, 0, Math.min(buffer.length, size - at), at);
    if (read === 0) break;
    for (let done = 0; done < read; ) done += writeSync(to, buffer, done, read - done, shift + at + done);
    at += read;
  }
}

/**
 * Writes the plan's new file and renames it over the file `path` names; returns the bytes written.
 * `planned` is the file as it was read for planning. A file with other hard links is refused: a new
 * inode under one name would leave the other names on the old file. A symbolic link is followed: the
 * new file replaces its target, next to which it is made, and the link stays.
 */
export function rewriteFile(path: string, plan: Plan, planned: Stats, options: { durable?: boolean }): number {
  let real: string;
  try {
    real = realpathSync(path);
  } catch (error) {
    throw ioError(path, 'resolve', error);
  }
  const temp = join(dirname(real), rewriteTemporaryName(basename(real), process.pid));
  let input: number | undefined;
  let output: number | undefined;
  let step = 'open';
  try {
    input = openSync(real, 'r');
    const before = fstatSync(input);
    if (!sameFile(before, planned)) throw changedSincePlanned(path);
    if (before.nlink > 1) throw splitsHardLinks(path, before.nlink);
    step = 'create the new file for';
    output = openSync(temp, 'wx', 0o600);
    step = 'write the new file for';
    copyShifted(input, output, before.size, plan.shift ?? 0);
    // The phases need no syncs in between: nothing sees the new file before the rename.
    const written = before.size + writeAtOffsets(output, plan);
    try {
      fchownSync(output, before.uid, before.gid);
    } catch (error) {
      // Only root may give a file away; anyone else's new file is theirs, as the old one was.
      if ((error as NodeJS.ErrnoException).code !== 'EPERM') throw error;
    }
    // After the owner: a change of owner clears the set-user-ID and set-group-ID bits.
    fchmodSync(output, before.mode & 0o7777);
    // Durable: the new file's bytes reach the disk before the name points at it.
    if (options.durable) fsyncSync(output);
    // The last look before the switch (the caller holds the file's lock against other cuda-patchelf runs).
    if (!sameFile(statSync(real), before)) throw changedSincePlanned(path);
    step = 'rename the new file over';
    renameSync(temp, real);
    if (options.durable) syncDirectory(dirname(real));
    return written;
  } catch (error) {
    if (output !== undefined) {
      try {
        unlinkSync(temp);
      } catch {
        // Already renamed, or never created: nothing to clean up.
      }
    }
    throw error instanceof CudaPatchelfError ? error : ioError(path, step, error);
  } finally {
    if (input !== undefined) closeSync(input);
    if (output !== undefined) closeSync(output);
  }
}

/** A rename is durable once the directory holding it is synced. */
function syncDirectory(directory: string): void {
  const fd = openSync(directory, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
