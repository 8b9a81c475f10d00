// File-system oracles for the tree tests (apply/check/plan over whole directories): copies of trees,
// snapshots to prove what did and did not change, the ELF magic (what readelf says of the files is
// read in readelf.ts).

import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, open, readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { requireTool } from './fixtures.js';
import { mustExec } from './exec.js';

/** `cp -a`: keeps symbolic links as links, hard links within the tree as hard links, modes and times. */
export async function copyTree(source: string, destination: string): Promise<void> {
  await mustExec(requireTool('cp'), ['-a', '--', source, destination], { timeoutMs: 120_000 });
}

/** Copies of the tree at `source` (copyTree), one DIR/NAME for each name: their paths, in the order of the names. */
export async function copiesOfTree<const Names extends readonly string[]>(
  source: string,
  dir: string,
  names: Names,
): Promise<{ [K in keyof Names]: string }> {
  const paths = names.map((name) => join(dir, name));
  for (const path of paths) await copyTree(source, path);
  return paths as { [K in keyof Names]: string };
}

export type EntrySnapshot =
  | {
      readonly type: 'file';
      readonly sha256: string;
      readonly size: number;
      readonly mode: number;
      readonly mtimeNs: bigint;
      readonly ino: bigint;
      readonly nlink: number;
    }
  | { readonly type: 'symlink'; readonly target: string; readonly mtimeNs: bigint }
  | { readonly type: 'dir' }
  | { readonly type: 'other' };

/** Every entry under a root by relative path (`/`-separated), without following symbolic links. */
export type TreeSnapshot = Map<string, EntrySnapshot>;

export async function sha256File(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

export async function snapshotTree(root: string): Promise<TreeSnapshot> {
  const result: TreeSnapshot = new Map();
  const visit = async (relative: string): Promise<void> => {
    const absolute = relative === '' ? root : join(root, relative);
    for (const name of (await readdir(absolute)).sort()) {
      const rel = relative === '' ? name : `${relative}/${name}`;
      const path = join(root, rel);
      const stats = await lstat(path, { bigint: true });
      if (stats.isSymbolicLink()) result.set(rel, { type: 'symlink', target: await readlink(path), mtimeNs: stats.mtimeNs });
      else if (stats.isDirectory()) {
        result.set(rel, { type: 'dir' });
        await visit(rel);
      } else if (stats.isFile()) {
        result.set(rel, {
          type: 'file',
          sha256: await sha256File(path),
          size: Number(stats.size),
          mode: Number(stats.mode),
          mtimeNs: stats.mtimeNs,
          ino: stats.ino,
          nlink: Number(stats.nlink),
        });
      } else result.set(rel, { type: 'other' });
    }
  };
  await visit('');
  return result;
}

/** Relative paths whose content or kind differ between two snapshots (times and inodes ignored). */
export function contentDifferences(a: TreeSnapshot, b: TreeSnapshot): string[] {
  const differences: string[] = [];
  for (const path of new Set([...a.keys(), ...b.keys()])) {
    const x = a.get(path);
    const y = b.get(path);
    if (x === undefined || y === undefined) differences.push(`${path}: only in ${x === undefined ? 'second' : 'first'}`);
    else if (x.type !== y.type) differences.push(`${path}: ${x.type} vs ${y.type}`);
    else if (x.type === 'file' && y.type === 'file' && (x.sha256 !== y.sha256 || x.mode !== y.mode))
      differences.push(`${path}: content or mode differs`);
    else if (x.type === 'symlink' && y.type === 'symlink' && x.target !== y.target)
      differences.push(`${path}: link target ${x.target} vs ${y.target}`);
  }
  return differences.sort();
}

/** The first four bytes are \x7fELF. */
export async function hasElfMagic(path: string): Promise<boolean> {
  const handle = await open(path, 'r');
  try {
    const buffer = Buffer.alloc(4);
    const { bytesRead } = await handle.read(buffer, 0, 4, 0);
    return bytesRead === 4 && buffer.equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]));
  } finally {
    await handle.close();
  }
}

/** What Nixpkgs' default would be without its quirks: drop empty and repeated entries, first wins. */
export function dedupeRunpath(value: string): string {
  const seen = new Set<string>();
  return value
    .split(':')
    .filter((entry) => entry !== '' && !seen.has(entry) && seen.add(entry) !== undefined)
    .join(':');
}

export function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, i) => permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]));
}
