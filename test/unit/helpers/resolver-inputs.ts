// Inputs for the resolver's pure core without a disk: an index from a table, and a file system given
// as the paths that exist.

import { posix } from 'node:path';
import type { ByteString } from '../../../src/elf/byte-string.js';
import { EM } from '../../../src/elf/constants.js';
import { LibraryIndex } from '../../../src/resolve/library-index.js';
import { ascii } from '../../helpers/byte-strings.js';

export const X86_64 = EM.EM_X86_64;
export const AARCH64 = EM.EM_AARCH64;
/** EI_OSABI values: SYSV (what most files carry), GNU (a file using GNU extensions), FreeBSD. */
export const SYSV = 0;
export const GNU = 3;
export const FREEBSD = 9;
/** A library directory of the Nix store that holds libz.so.1. */
export const ZLIB = '/nix/store/aaaa-zlib/lib';

/** [file name, machine, directory, OS ABI], in walk order. */
export type IndexRow = readonly [string, number, string, number];

export function indexOf(rows: readonly IndexRow[]): LibraryIndex {
  const index = new LibraryIndex();
  for (const [name, machine, directory, osAbi] of rows)
    index.add(ascii<ByteString>(name), machine, { directory: ascii<ByteString>(directory), osAbi });
  return index;
}

export interface FakeDisk {
  /** Names in the libc directory. */
  readonly libc?: readonly string[];
  /** Those of them that count as libc's (rule 2); all of them when absent (a directory of glibc alone). */
  readonly libcOwns?: readonly string[];
  /** Files and directories that exist, absolute. */
  readonly paths?: readonly string[];
  /** Symbolic links: path → the canonical path it leads to (which then exists). */
  readonly links?: Readonly<Record<string, string>>;
}

/** The disk as the resolver asks about it: canonical paths folded lexically, then through `links`. */
export interface FakeFileSystem {
  readonly inLibcDir: (name: string) => boolean;
  readonly libcOwns: (name: string) => boolean;
  readonly isFile: (path: string) => boolean;
  readonly realPath: (path: string) => ByteString | null;
}

export function fakeFileSystem(disk: FakeDisk = {}): FakeFileSystem {
  const libc = new Set(disk.libc ?? []);
  const links = new Map(Object.entries(disk.links ?? {}));
  const paths = new Set([...(disk.paths ?? []), ...links.values()]);
  const canonical = (path: string): string => {
    const normalized = posix.normalize(path).replace(/(.)\/$/, '$1');
    return links.get(normalized) ?? normalized;
  };
  return {
    inLibcDir: (name) => libc.has(name),
    libcOwns: (name) => (disk.libcOwns ?? [...libc]).includes(name),
    isFile: (path) => paths.has(path),
    realPath: (path) => {
      const real = canonical(path);
      return paths.has(real) ? ascii<ByteString>(real) : null;
    },
  };
}
