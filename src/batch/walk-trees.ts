// Walks the given directories without following symbolic links, yielding each regular file once per
// inode (hard links are reported, not patched twice) and reporting what is not a regular file.

import { stat } from 'node:fs/promises';
import { relative, resolve, sep } from 'node:path';
import type { Stats } from 'node:fs';
import fg from 'fast-glob';
import { ioError } from '../elf/byte-source.js';

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
  | { readonly kind: 'skip'; readonly path: string; readonly reason: 'symlink' | 'special' | 'hard-link'; readonly detail?: string }
  | { readonly kind: 'error'; readonly path: string; readonly error: unknown };

function toPosix(path: string): string {
  return sep === '/' ? path : path.split(sep).join('/');
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
      rootStats = await stat(absoluteRoot);
    } catch (error) {
      yield { kind: 'error', path: root, error: ioError(root, 'walk', error) };
      continue;
    }
    if (!rootStats.isDirectory()) {
      yield classify(absoluteRoot, toPosix(relative(resolve(absoluteRoot, '..'), absoluteRoot)), rootStats);
      continue;
    }
    const stream = fg.stream('**', {
      cwd: absoluteRoot,
      dot: true,
      onlyFiles: false,
      followSymbolicLinks: false,
      objectMode: true,
      stats: true,
      absolute: true,
      throwErrorOnBrokenSymbolicLink: false,
      suppressErrors: false,
    }) as AsyncIterable<{ path: string; stats: Stats }>;
    try {
      for await (const entry of stream) {
        if (entry.stats.isDirectory()) continue;
        yield classify(entry.path, toPosix(relative(absoluteRoot, entry.path)), entry.stats);
      }
    } catch (error) {
      const path = (error as NodeJS.ErrnoException).path ?? root;
      yield { kind: 'error', path, error: ioError(path, 'walk', error) };
    }
  }
}
