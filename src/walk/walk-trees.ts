// Walks the given directories without following symbolic links, yielding each regular file and
// reporting what is not one.
//
// Directories are read one at a time from an explicit stack, their names as raw bytes wherever one is
// not UTF-8 (readEntries), so that every entry gets an outcome: a name with a newline is a name like
// any other, a tree thousands of levels deep costs no recursion, a directory that cannot be read is
// reported and its siblings are still walked, and a name that is not UTF-8 — which a path string
// cannot spell, so no file operation can reach it — is reported as such instead of turning into a
// different name that does not exist.
// An entry's type comes from the directory read (Node takes an lstat only where the file system does
// not give the type): the walk takes no stat of a file. Most files of a tree are not ELF and are told
// apart by their first bytes alone; an ELF file's stat is taken when it is opened, and that is where a
// hard link is told apart too (edit/plan-file.ts, InodeNames). The calls are synchronous: a directory read
// served from the kernel's caches costs less than a round trip through the thread pool, and the walk
// feeds the workers from the main thread.

import { readdirSync, realpathSync, statSync, type Dirent, type Stats } from 'node:fs';
import { relative, resolve, sep } from 'node:path';
import { ioError } from '../errors/io-error.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { isRewriteTemporary } from './rewrite-temporary.js';

export type WalkItem =
  | {
      readonly kind: 'file';
      readonly path: string;
      readonly relativePath: string;
      /** Names of this inode in the walked trees, when counted (see patchTrees); 1 otherwise. */
      readonly names?: number;
      /**
       * The file is a root the command line named, not a file found in a tree: the path as named, made
       * absolute (`path` is the file's real path when it was named through a link).
       */
      readonly named?: string;
    }
  | { readonly kind: 'skip'; readonly path: string; readonly reason: 'symlink' | 'special' | 'rewrite-temporary' }
  | { readonly kind: 'error'; readonly path: string; readonly error: CudaPatchelfError };

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
  return [...raw]
    .map((byte) => (byte >= 0x20 && byte < 0x7f && byte !== 0x5c ? String.fromCharCode(byte) : `\\x${byte.toString(16).padStart(2, '0')}`))
    .join('');
}

function unaddressable(path: string, isDirectory: boolean): CudaPatchelfError {
  const what = isDirectory
    ? 'directory name is not UTF-8, so its files cannot be reached'
    : 'file name is not UTF-8, so the file cannot be opened';
  return new CudaPatchelfError('io', `${what}; left alone (rename it to have it patched)`, { file: path });
}

interface DirectoryEntry {
  readonly entry: Dirent<string> | Dirent<Buffer>;
  /** The name as a path string can hold it; null when it is not UTF-8. */
  readonly name: string | null;
}

/**
 * A directory's entries in name order (of UTF-16 code units; of bytes where a name is read raw), which
 * makes the walk's order the same every run. Names are read as text first, the cheap way (no Buffer per
 * name): Node decodes them as UTF-8 and puts U+FFFD where the bytes are not, so a directory with a
 * U+FFFD in a name is read again as raw bytes (a name that holds a real U+FFFD costs that second read).
 */
function readEntries(path: string): DirectoryEntry[] {
  const text = readdirSync(path, { withFileTypes: true });
  if (!text.some((entry) => entry.name.includes('\uFFFD'))) {
    return text.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).map((entry) => ({ entry, name: entry.name }));
  }
  const raw = readdirSync(path, { withFileTypes: true, encoding: 'buffer' });
  return raw.sort((a, b) => Buffer.compare(a.name, b.name)).map((entry) => ({ entry, name: nameText(entry.name) }));
}

/**
 * `recursive: false` lists each root directory's own entries only (a library directory searched as the
 * loader searches it); its subdirectories are not yielded.
 */
export function* walkTrees(roots: readonly string[], options: { readonly recursive?: boolean } = {}): Generator<WalkItem> {
  const recursive = options.recursive !== false;
  for (const root of roots) {
    const absoluteRoot = resolve(root);
    let rootStats: Stats;
    // A file named through a link is the file it names: a file is opened without following links (so
    // that a link put in its place is refused), so the walk lists the link's target.
    let rootFile = absoluteRoot;
    try {
      // A root named on the command line is followed when it is a link (a Nix `result` link), as
      // `find -H` does; links inside the tree are not.
      rootStats = statSync(absoluteRoot);
      if (rootStats.isFile()) rootFile = realpathSync(absoluteRoot);
    } catch (error) {
      yield { kind: 'error', path: root, error: ioError(root, 'walk', error) };
      continue;
    }
    if (!rootStats.isDirectory()) {
      yield rootStats.isFile()
        ? { kind: 'file', path: rootFile, relativePath: toPosix(relative(resolve(rootFile, '..'), rootFile)), named: absoluteRoot }
        : { kind: 'skip', path: absoluteRoot, reason: 'special' };
      continue;
    }
    const pending: Directory[] = [{ path: absoluteRoot, relativePath: '' }];
    for (let directory = pending.pop(); directory !== undefined; directory = pending.pop()) {
      let entries: DirectoryEntry[];
      try {
        entries = readEntries(directory.path);
      } catch (error) {
        yield { kind: 'error', path: directory.path, error: ioError(directory.path, 'read the directory', error) };
        continue;
      }
      const subdirectories: Directory[] = [];
      for (const { entry, name } of entries) {
        if (name === null) {
          // Only a directory read raw has names that are not UTF-8.
          const shown = `${directory.path}${sep}${escapedName(entry.name as Buffer)}`;
          yield { kind: 'error', path: shown, error: unaddressable(shown, entry.isDirectory()) };
          continue;
        }
        const path = `${directory.path}${sep}${name}`;
        const relativePath = directory.relativePath === '' ? name : `${directory.relativePath}/${name}`;
        if (entry.isDirectory()) {
          if (recursive) subdirectories.push({ path, relativePath });
        } else if (entry.isSymbolicLink()) yield { kind: 'skip', path, reason: 'symlink' };
        else if (isRewriteTemporary(name)) yield { kind: 'skip', path, reason: 'rewrite-temporary' };
        else if (entry.isFile()) yield { kind: 'file', path, relativePath };
        else yield { kind: 'skip', path, reason: 'special' };
      }
      // Depth first, in name order.
      pending.push(...subdirectories.reverse());
    }
  }
}
