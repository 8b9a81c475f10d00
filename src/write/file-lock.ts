// One writer per file at a time, across processes and commands. Two runs (two `apply`s on one tree,
// or `apply` and a single-file edit) must not interleave the writes of one file: each run's plan is only right for the bytes it read, and writeIfUnchanged's check
// (same inode, size and mtime as planned) cannot close the gap between that check and the writes.
//
// The lock is a Unix socket bound in Linux's abstract namespace under the file's device and inode: the
// kernel gives the name to one socket at a time and frees it when the holder closes it or dies, even
// by SIGKILL, so a killed run leaves no stale lock behind. Where there is no abstract namespace (not
// Linux), files are written without the lock, as before.

import { createServer, type Server } from 'node:net';
import type { Stats } from 'node:fs';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';

/** How long a writer waits for another to finish one file: writing a file takes milliseconds. */
const WAIT_MS = 30_000;
const RETRY_MS = 2;

function listen(name: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(name, () => {
      server.unref();
      resolve(server);
    });
  });
}

/** The abstract socket name of a file's lock (a leading NUL puts it in the abstract namespace). */
export function lockName(stats: Pick<Stats, 'dev' | 'ino'>): string {
  return `\0cuda-patchelf/${stats.dev}/${stats.ino}`;
}

/** The lock on the file `stats` describes, or null where this system has no abstract sockets. */
async function acquire(path: string, stats: Stats): Promise<Server | null> {
  const name = lockName(stats);
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    try {
      return await listen(name);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') return null;
      if (Date.now() > deadline) {
        throw new CudaPatchelfError('changed', `another process has been writing the file for ${WAIT_MS / 1000} s; left alone`, {
          file: path,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }
}

/** Runs `write` holding the file's lock: no other cuda-patchelf writes the same inode meanwhile. */
export async function withFileLock<T>(path: string, stats: Stats, write: () => Promise<T>): Promise<T> {
  const lock = process.platform === 'linux' ? await acquire(path, stats) : null;
  try {
    return await write();
  } finally {
    lock?.close();
  }
}
