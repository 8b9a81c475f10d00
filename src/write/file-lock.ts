// One writer per file at a time, across processes and commands. Two runs (two `apply`s on one tree,
// or `apply` and a single-file edit) must not interleave the writes of one file: each run's plan is
// only right for the bytes it read, and writeIfUnchanged's check (same inode, size and mtime as planned)
// cannot close the gap between that check and the writes.
//
// The lock is a Unix socket bound in Linux's abstract namespace under the file's device and inode: the
// kernel gives the name to one socket at a time and frees it when the holder closes it or dies, even
// by SIGKILL, so a killed run leaves no stale lock behind. Where the system will not bind it (no
// abstract namespace outside Linux), the lock is unavailable, and the result says why.

import { createServer, type Server } from 'node:net';
import type { Stats } from 'node:fs';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';

/** How long a writer waits for another to finish one file: writing a file takes milliseconds. */
const WAIT_MS = 30_000;
const RETRY_MS = 2;

/** A lock taken, to release once the file is written, or why there is none. */
export type FileLock =
  | { readonly kind: 'locked'; release(): void }
  /** `reason`: the system's error code for the socket (outside Linux, which has no abstract namespace, its bind fails). */
  | { readonly kind: 'unavailable'; readonly reason: string };

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

/**
 * Takes the lock `name` (lockName) for writing the file at `path`: while another process holds it,
 * waits, and after WAIT_MS fails with a `changed` error naming the file.
 */
export async function takeLock(name: string, path: string): Promise<FileLock> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    try {
      const server = await listen(name);
      return { kind: 'locked', release: () => server.close() };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? String(error);
      if (code !== 'EADDRINUSE') return { kind: 'unavailable', reason: code };
      if (Date.now() > deadline) {
        throw new CudaPatchelfError('changed', `another process has been writing the file for ${WAIT_MS / 1000} s; left alone`, {
          file: path,
        });
      }
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }
}
