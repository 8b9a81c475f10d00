// The per-inode write lock (src/write/file-lock.ts) as a value: taken, waited for while another holds
// it, and unavailable, with the system's reason, where the socket cannot be bound.

import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockName, takeLock } from '../../src/write/file-lock.js';

let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'cuda-patchelf-file-lock-'));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('takeLock', () => {
  it('takes a free lock, and waits for a held one until it is released', async () => {
    const file = join(scratch, 'lib.so');
    await writeFile(file, 'x');
    const name = lockName(await stat(file));
    const first = await takeLock(name, file);
    expect(first.kind).toBe('locked');
    let secondTaken = false;
    const second = takeLock(name, file).then((lock) => {
      secondTaken = true;
      return lock;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(secondTaken).toBe(false);
    if (first.kind === 'locked') first.release();
    const taken = await second;
    expect(taken.kind).toBe('locked');
    if (taken.kind === 'locked') taken.release();
  });

  it('is unavailable, with the reason, when the system will not bind the socket', async () => {
    // A socket path in a directory that does not exist: the bind fails (libuv reports ENOENT as EACCES),
    // as the abstract name's does outside Linux.
    const lock = await takeLock(join(scratch, 'no-such-directory', 'lock'), join(scratch, 'lib.so'));
    expect(lock).toEqual({ kind: 'unavailable', reason: 'EACCES' });
  });
});
