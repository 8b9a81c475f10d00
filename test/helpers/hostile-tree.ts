// A tree built to trip a walker and a writer up: awkward names (spaces, a newline, bytes that are not
// UTF-8, in a file's name and in a directory's), files and directories without the permissions a
// writer expects, FIFOs, sockets and device nodes, symbolic link loops, links that leave the tree, and
// next to it a directory the links point into. Each entry says what `apply` must report for it, as the
// owner `apply` runs as (root, or the unprivileged user the tree is handed to).

import { chmod, copyFile, link, mkdir, symlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fixture } from './fixtures.js';
import { mustExec } from './exec.js';

/**
 * What apply must do with an entry: patch it, skip it (and why), fail it with a message, or give it no
 * line of its own (a walked directory; a file in a directory whose own line says it was not reached).
 */
export type HostileExpectation =
  | { readonly status: 'patched' | 'unchanged' }
  | { readonly status: 'skipped'; readonly reason: 'symlink' | 'special' | 'not-elf' }
  | { readonly status: 'failed'; readonly message: RegExp }
  | { readonly status: 'no-line' };

export interface HostileEntry {
  /** The name as the JSON report spells the path after the root (`\xNN` for bytes that are not UTF-8). */
  readonly reported: string;
  /** The entry's path on disk, as bytes (a name that is not UTF-8 cannot be a string). */
  readonly onDisk: Buffer;
  /** A regular file whose bytes are checked: unchanged unless patched. */
  readonly file: boolean;
  readonly asRoot: HostileExpectation;
  readonly asUser: HostileExpectation;
}

export interface HostileTree {
  readonly root: string;
  /** Outside the tree: links point here, and nothing in it may change. */
  readonly outside: string;
  readonly entries: readonly HostileEntry[];
}

const PATCHED = { status: 'patched' } as const;
const SYMLINK = { status: 'skipped', reason: 'symlink' } as const;
const SPECIAL = { status: 'skipped', reason: 'special' } as const;
const NO_LINE = { status: 'no-line' } as const;
const failed = (message: RegExp): HostileExpectation => ({ status: 'failed', message });
const NOT_UTF8_FILE = failed(/file name is not UTF-8, so the file cannot be opened; left alone/);
const READ_ONLY = failed(/read-only file \(mode \d+\); pass --make-writable/);

/** A shared library with a runpath: every regular file of the tree is a copy of it. */
export const HOSTILE_LIBRARY = 'compiled/x86_64/libuser-runpath';

/** The user an unprivileged run uses, and its group (Debian's nobody/nogroup). */
export const UNPRIVILEGED = { uid: 65534, gid: 65534 };

/**
 * Builds the tree under `base` (`base/tree`, `base/outside`). With `owner`, every entry is handed to
 * that user first, so that the modes, not root's privileges, decide what it may do.
 */
export async function buildHostileTree(base: string, owner?: { uid: number; gid: number }): Promise<HostileTree> {
  const root = join(base, 'tree');
  const outside = join(base, 'outside');
  const library = fixture(HOSTILE_LIBRARY).path;
  const entries: HostileEntry[] = [];
  const rootBytes = Buffer.from(root);
  const at = (name: Buffer | string): Buffer =>
    Buffer.concat([rootBytes, Buffer.from('/'), Buffer.isBuffer(name) ? name : Buffer.from(name)]);
  const add = (reported: string, onDisk: Buffer, file: boolean, asRoot: HostileExpectation, asUser = asRoot): void => {
    entries.push({ reported, onDisk, file, asRoot, asUser });
  };
  await mkdir(join(root, 'sub'), { recursive: true });
  await mkdir(outside, { recursive: true });
  await copyFile(library, join(outside, 'libexternal.so'));

  for (const name of ['ok.so', 'with space.so', 'new\nline.so', 'sub/nested.so']) {
    await copyFile(library, join(root, name));
    add(name, at(name), true, PATCHED);
  }
  // Names that are not UTF-8: written through Buffer paths, which Node passes to the kernel as they are.
  const badFile = Buffer.concat([Buffer.from('bad'), Buffer.from([0xff]), Buffer.from('name.so')]);
  await copyFile(library, at(badFile));
  add('bad\\xffname.so', at(badFile), true, NOT_UTF8_FILE);
  const badDir = Buffer.concat([Buffer.from('dir'), Buffer.from([0xc3, 0x28])]);
  await mkdir(at(badDir));
  const inBadDir = Buffer.concat([at(badDir), Buffer.from('/inside.so')]);
  await copyFile(library, inBadDir);
  add('dir\\xc3(', at(badDir), false, failed(/directory name is not UTF-8, so its files cannot be reached; left alone/));
  add('dir\\xc3(/inside.so', inBadDir, true, NO_LINE);

  await copyFile(library, join(root, 'read-only.so'));
  add('read-only.so', at('read-only.so'), true, READ_ONLY);
  // A failure whose name has a newline: its stderr line must still be one line.
  await copyFile(library, join(root, 'read-only\nnewline.so'));
  add('read-only\nnewline.so', at('read-only\nnewline.so'), true, READ_ONLY);
  // Root reads a file without read permission, and its mode says read-only: refused as such. The
  // owner without read permission cannot open it at all.
  await copyFile(library, join(root, 'no-read.so'));
  add('no-read.so', at('no-read.so'), true, READ_ONLY, failed(/cannot open: permission denied/));
  // In place, a file in a read-only directory is writable: the directory gains no entry.
  await mkdir(join(root, 'read-only-dir'));
  await copyFile(library, join(root, 'read-only-dir', 'inside.so'));
  add('read-only-dir/inside.so', at('read-only-dir/inside.so'), true, PATCHED);
  // A directory nobody may read: root still can.
  await mkdir(join(root, 'closed-dir'));
  await copyFile(library, join(root, 'closed-dir', 'hidden.so'));
  add('closed-dir', at('closed-dir'), false, NO_LINE, failed(/cannot read the directory: permission denied/));
  add('closed-dir/hidden.so', at('closed-dir/hidden.so'), true, PATCHED, NO_LINE);

  // A directory whose names may be listed but not reached (read, no search permission): the walk lists
  // the file, whose type comes with the listing, and opening it is refused. Root reaches it.
  await mkdir(join(root, 'unsearchable-dir'));
  await copyFile(library, join(root, 'unsearchable-dir', 'listed.so'));
  add('unsearchable-dir/listed.so', at('unsearchable-dir/listed.so'), true, PATCHED, failed(/cannot open: permission denied/));

  await mustExec('mkfifo', [join(root, 'fifo.so')]);
  add('fifo.so', at('fifo.so'), false, SPECIAL);
  // A socket file, as a dead daemon leaves one behind. Node removes the file of a socket it closes,
  // so the socket gets a second name first, which stays.
  const bound = join(base, 'socket.tmp');
  await new Promise<void>((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(bound, () => {
      link(bound, join(root, 'socket.so')).then(() => server.close(() => resolve()), reject);
    });
  });
  add('socket.so', at('socket.so'), false, SPECIAL);
  // A character device (the same numbers as /dev/null): only root may make one.
  await mustExec('mknod', [join(root, 'null.so'), 'c', '1', '3']);
  add('null.so', at('null.so'), false, SPECIAL);

  await symlink('loop-b.so', join(root, 'loop-a.so'));
  await symlink('loop-a.so', join(root, 'loop-b.so'));
  await symlink('.', join(root, 'self'));
  await symlink(join(outside, 'libexternal.so'), join(root, 'external.so'));
  await symlink('../outside', join(root, 'outside-dir'));
  for (const name of ['loop-a.so', 'loop-b.so', 'self', 'external.so', 'outside-dir']) add(name, at(name), false, SYMLINK);

  if (owner !== undefined) await mustExec('chown', ['-R', '--no-dereference', `${owner.uid}:${owner.gid}`, root, outside]);
  await chmod(join(root, 'read-only.so'), 0o444);
  await chmod(join(root, 'read-only\nnewline.so'), 0o444);
  await chmod(join(root, 'no-read.so'), owner === undefined ? 0o000 : 0o200);
  await chmod(join(root, 'read-only-dir'), 0o555);
  await chmod(join(root, 'closed-dir'), 0o000);
  await chmod(join(root, 'unsearchable-dir'), 0o444);
  return { root, outside, entries };
}

/**
 * A file deeper than PATH_MAX (4096 bytes), made with relative steps as no path string can name it:
 * `levels` directories named with `nameLength` letters each. Returns the steps' directory name.
 */
export async function buildTooDeepFile(root: string, levels: number, nameLength: number): Promise<string> {
  const name = 'd'.repeat(nameLength);
  await writeFile(
    join(root, 'deep.sh'),
    `set -euo pipefail\ncd "$1"\nfor _ in $(seq ${levels}); do mkdir ${name}; cd ${name}; done\ncp "$2" lib.so\n`,
  );
  await mustExec('bash', [join(root, 'deep.sh'), root, fixture(HOSTILE_LIBRARY).path]);
  return name;
}

/**
 * The moments of apply's work on a file where a cut (a truncation by another process) can land, each
 * exactly: after the walk listed the file and before apply opens it; between the open and the first
 * read; just before the first read that reaches the bytes the cut removes; after planning
 * and before the open for writing (where the writer checks the file); after the last write.
 *
 * One moment is left out: between the writer's check of the file and its first write. A write past the
 * end of a file cut there extends it again, with zeros from the cut to the write: a file neither
 * original nor truncated, whose next read fails on whatever the zeros broke (a cut 100 bytes short
 * zeroes the section header of .shstrtab: "string index 0 is outside the section name table (size
 * 0)"). No check before a write closes that gap against a process that takes no lock; a read-back
 * after the writes could at most report it.
 */
export const CUT_MOMENTS = ['listed', 'opened', 'reading', 'planned', 'written'] as const;
export type CutMoment = (typeof CUT_MOMENTS)[number];

export interface FileCut {
  readonly path: string;
  readonly moment: CutMoment;
  /** The size the file is truncated to. */
  readonly size: number;
}

/**
 * Installed in every thread of the CLI's process by node --import (a file is read, planned and written
 * by one thread), it truncates each file of `cuts` at its moment. It is sent as source text
 * (Function#toString), so it uses nothing but its arguments.
 */
function installCutHook(fs: typeof import('node:fs'), syncBuiltinESMExports: () => void, cuts: readonly FileCut[]): void {
  const pending = new Map(cuts.map((cut) => [cut.path, cut]));
  const reading = new Map<number, FileCut>();
  const written = new Map<number, FileCut>();
  const { openSync, readSync, closeSync, truncateSync, constants } = fs;
  const cut = (file: FileCut): void => {
    pending.delete(file.path);
    truncateSync(file.path, file.size);
  };
  const forWriting = (flags: unknown): boolean =>
    typeof flags === 'number' ? (flags & (constants.O_WRONLY | constants.O_RDWR)) !== 0 : flags !== undefined && flags !== 'r';
  const mutable = fs as unknown as Record<string, unknown>;
  mutable.openSync = (...args: Parameters<typeof openSync>): number => {
    const file = typeof args[0] === 'string' ? pending.get(args[0]) : undefined;
    if (file === undefined) return openSync(...args);
    const writing = forWriting(args[1]);
    if ((file.moment === 'listed' && !writing) || (file.moment === 'planned' && writing)) cut(file);
    const fd = openSync(...args);
    if (file.moment === 'opened' && !writing) cut(file);
    if (file.moment === 'reading' && !writing) reading.set(fd, file);
    if (file.moment === 'written' && writing) written.set(fd, file);
    return fd;
  };
  // FileByteSource reads with (fd, buffer, offset, length, position).
  mutable.readSync = (fd: number, ...rest: unknown[]): number => {
    const [, , length, position] = rest;
    const file = reading.get(fd);
    if (file !== undefined && typeof length === 'number' && typeof position === 'number' && position + length > file.size) {
      reading.delete(fd);
      cut(file);
    }
    return (readSync as (...args: unknown[]) => number)(fd, ...rest);
  };
  mutable.closeSync = (fd: number): void => {
    closeSync(fd);
    reading.delete(fd);
    const file = written.get(fd);
    if (file === undefined) return;
    written.delete(fd);
    cut(file);
  };
  syncBuiltinESMExports();
}

/** The text of a module for node --import that makes the cuts. */
export function cutHookModule(cuts: readonly FileCut[]): string {
  return [
    "import fs from 'node:fs';",
    "import { syncBuiltinESMExports } from 'node:module';",
    `(${installCutHook.toString()})(fs, syncBuiltinESMExports, ${JSON.stringify(cuts)});`,
  ].join('\n');
}
