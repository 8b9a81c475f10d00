// Walks the given directories without following symbolic links, yielding each regular file once per
// inode (hard links are reported, not patched twice) and reporting what is not a regular file.
//
// Directories are read as raw names (Buffers), one directory at a time from an explicit stack, so that
// every entry gets an outcome: a name with a newline is a name like any other, a tree thousands of
// levels deep costs no recursion, a directory that cannot be read is reported and its siblings are
// still walked, and a name that is not UTF-8 — which a path string cannot spell, so no file operation
// can reach it — is reported as such instead of turning into a different name that does not exist.
// The calls are synchronous: a directory read or stat served from the kernel's caches costs less than
// a round trip through the thread pool, and the walk feeds the workers from the main thread.

import { lstatSync, readdirSync, statSync, type Dirent, type Stats } from 'node:fs';
import { relative, resolve, sep } from 'node:path';
import { ioError } from '../errors/io-error.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { isRewriteTemporary } from '../write/rewrite-file.js';

export type WalkItem =
  | {
      readonly kind: 'file';
      readonly path: string;
      readonly relativePath: string;
      readonly size: number;
      readonly nlink: number;
      /** Names of this inode in the walked trees, when counted (see patchTrees); 1 otherwise. */
      readonly names?: number;
    }
  | { readonly kind: 'skip'; readonly path: string; readonly reason: 'symlink' | 'special' | 'hard-link' | 'rewrite-temporary'; readonly detail?: string }
  | { readonly kind: 'error'; readonly path: string; readonly error: unknown };

function toPosix(path: string): string {
  return sep === '/' ? path : path.split(sep).join('/');
}

interface Directory {
  readonly path: string;
  /** Relative to the walked root, `/`-separated; '' for the root. */
  readonly relativePath: string;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The UTF-8 reading of a raw name, or null when the bytes are not UTF-8 (a string cannot spell them). */
function nameText(raw: Buffer): string | null {
  try {
    return strictUtf8.decode(raw);
  } catch {
    return null;
  }
}

/** A raw name for people: bytes that are not printable ASCII as \xNN. */
function escapedName(raw: Buffer): string {
  return [...raw].map((byte) => (byte >= 0x20 && byte < 0x7f && byte !== 0x5c ? String.fromCharCode(byte) : `\\x${byte.toString(16).padStart(2, '0')}`)).join('');
}

function unaddressable(path: string, isDirectory: boolean): CudaPatchelfError {
  const what = isDirectory ? 'directory name is not UTF-8, so its files cannot be reached' : 'file name is not UTF-8, so the file cannot be opened';
  return new CudaPatchelfError('io', `${what}; left alone (rename it to have it patched)`, { file: path });
}

export async function* walkTrees(roots: readonly string[]): AsyncGenerator<WalkItem> {
  const seen = new Map<string, string>();
  const classify = (path: string, relativePath: string, stats: Stats): WalkItem => {
    if (stats.isSymbolicLink()) return { kind: 'skip', path, reason: 'symlink' };
    if (!stats.isFile()) return { kind: 'skip', path, reason: 'special' };
    const key = `${stats.dev}:${stats.ino}`;
    const first = seen.get(key);
    if (first !== undefined) return { kind: 'skip', path, reason: 'hard-link', detail: first };
    seen.set(key, path);
    return { kind: 'file', path, relativePath, size: stats.size, nlink: stats.nlink };
  };
  for (const root of roots) {
    const absoluteRoot = resolve(root);
    let rootStats: Stats;
    try {
      // A root named on the command line is followed when it is a link (a Nix `result` link), as
      // `find -H` does; links inside the tree are not.
      rootStats = statSync(absoluteRoot);
    } catch (error) {
      yield { kind: 'error', path: root, error: ioError(root, 'walk', error) };
      continue;
    }
    if (!rootStats.isDirectory()) {
      yield classify(absoluteRoot, toPosix(relative(resolve(absoluteRoot, '..'), absoluteRoot)), rootStats);
      continue;
    }
    const pending: Directory[] = [{ path: absoluteRoot, relativePath: '' }];
    for (let directory = pending.pop(); directory !== undefined; directory = pending.pop()) {
      let entries: Dirent<Buffer>[];
      try {
        entries = readdirSync(directory.path, { withFileTypes: true, encoding: 'buffer' });
      } catch (error) {
        yield { kind: 'error', path: directory.path, error: ioError(directory.path, 'read the directory', error) };
        continue;
      }
      const subdirectories: Directory[] = [];
      for (const entry of entries.sort((a, b) => Buffer.compare(a.name, b.name))) {
        const name = nameText(entry.name);
        if (name === null) {
          const shown = `${directory.path}${sep}${escapedName(entry.name)}`;
          yield { kind: 'error', path: shown, error: unaddressable(shown, entry.isDirectory()) };
          continue;
        }
        const path = `${directory.path}${sep}${name}`;
        const relativePath = directory.relativePath === '' ? name : `${directory.relativePath}/${name}`;
        if (entry.isDirectory()) subdirectories.push({ path, relativePath });
        else if (entry.isSymbolicLink()) yield { kind: 'skip', path, reason: 'symlink' };
        else if (isRewriteTemporary(name)) yield { kind: 'skip', path, reason: 'rewrite-temporary' };
        else {
          let stats: Stats;
          try {
            stats = lstatSync(path);
          } catch (error) {
            yield { kind: 'error', path, error: ioError(path, 'stat', error) };
            continue;
          }
          yield classify(path, relativePath, stats);
        }
      }
      // Depth first, in name order.
      pending.push(...subdirectories.reverse());
    }
  }
}
