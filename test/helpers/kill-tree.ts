// A tree of real ELF files for whole-tree campaigns (kills, concurrent runs): the ELF files of some
// source directories (this machine's /usr, the fixtures' Debian, CUDA and compiled files), copied
// under one root with their relative paths, regular files only, each at most a given size so that the
// tree can be restored between rounds in a moment.

import type { Dirent } from 'node:fs';
import { copyFile, mkdir, open, readdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { archOfMachine, type Arch } from './arch.js';
import { CACHE_DIR } from './fixtures.js';

export interface ElfTreeFile {
  /** Path relative to the tree root, `/`-separated. */
  readonly rel: string;
  /** null: a machine none of the fixtures is built for. */
  readonly arch: Arch | null;
  readonly size: number;
}

export interface ElfTreeSource {
  readonly dir: string;
  /** The top directory it becomes in the tree. */
  readonly name: string;
  /** At most this many files from this source (the first in path order). */
  readonly maxFiles?: number;
}

/** Debian's x86_64 libraries and programs, and the fixtures' files of every architecture. */
export const REAL_ELF_SOURCES: readonly ElfTreeSource[] = [
  { dir: '/usr/lib/x86_64-linux-gnu', name: 'usr-lib' },
  { dir: '/usr/bin', name: 'usr-bin' },
  { dir: '/usr/sbin', name: 'usr-sbin' },
  { dir: '/usr/libexec', name: 'usr-libexec' },
  { dir: join(CACHE_DIR, 'debian'), name: 'debian' },
  { dir: join(CACHE_DIR, 'cuda'), name: 'cuda' },
  { dir: join(CACHE_DIR, 'compiled'), name: 'compiled' },
];

/** e_machine, or null for a file that is not ELF (the first 20 bytes say ELF, class and byte order, and e_machine). */
async function elfMachine(path: string): Promise<number | null> {
  const handle = await open(path, 'r');
  try {
    const head = Buffer.alloc(20);
    const { bytesRead } = await handle.read(head, 0, 20, 0);
    if (bytesRead < 20 || head.readUInt32BE(0) !== 0x7f454c46) return null;
    return head[5] === 2 ? head.readUInt16BE(18) : head.readUInt16LE(18);
  } finally {
    await handle.close();
  }
}

/** Regular files under `dir` (links not followed), in path order. */
async function regularFiles(dir: string, relative = ''): Promise<{ rel: string; path: string }[]> {
  const found: { rel: string; path: string }[] = [];
  let entries: Dirent[];
  try {
    entries = await readdir(join(dir, relative), { withFileTypes: true });
  } catch {
    return found;
  }
  for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const rel = relative === '' ? entry.name : `${relative}/${entry.name}`;
    if (entry.isDirectory()) found.push(...(await regularFiles(dir, rel)));
    else if (entry.isFile()) found.push({ rel, path: join(dir, rel) });
  }
  return found;
}

/** Copies the ELF files of the sources (each at most `maxFileBytes`) into `root`. */
export async function assembleElfTree(root: string, sources: readonly ElfTreeSource[], maxFileBytes: number): Promise<ElfTreeFile[]> {
  const files: ElfTreeFile[] = [];
  for (const source of sources) {
    let taken = 0;
    for (const { rel, path } of await regularFiles(source.dir)) {
      if (source.maxFiles !== undefined && taken >= source.maxFiles) break;
      const handle = await open(path, 'r').catch(() => null);
      if (handle === null) continue;
      const { size } = await handle.stat();
      await handle.close();
      if (size > maxFileBytes) continue;
      const machine = await elfMachine(path);
      if (machine === null) continue;
      const treeRel = `${source.name}/${rel}`;
      await mkdir(dirname(join(root, treeRel)), { recursive: true });
      await copyFile(path, join(root, treeRel));
      files.push({ rel: treeRel, arch: archOfMachine(machine), size });
      taken++;
    }
  }
  return files;
}
