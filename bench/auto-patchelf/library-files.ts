// What the differential asks of the disk about libraries, as the loader sees them: the file of a name
// in a directory that a file of one machine and class could load (the loader passes over a file of
// another), the library names a directory holds, and whether two files are one library (the same
// file, or a byte-identical copy: docs/auto-patchelf.md counts those as no other copy).

import { closeSync, openSync, readdirSync, readFileSync, readSync, realpathSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** EI_CLASS, EI_DATA and e_machine, as a key; null for a file that is not ELF or cannot be read. */
const kinds = new Map<string, string | null>();

function elfKind(path: string): string | null {
  const known = kinds.get(path);
  if (known !== undefined) return known;
  let kind: string | null = null;
  try {
    const fd = openSync(path, 'r');
    try {
      const head = Buffer.alloc(20);
      if (readSync(fd, head, 0, 20, 0) === 20 && head.readUInt32BE(0) === 0x7f454c46) {
        const machine = head[5] === 2 ? head.readUInt16BE(18) : head.readUInt16LE(18);
        kind = `${head[4]}:${head[5]}:${machine}`;
      }
    } finally {
      closeSync(fd);
    }
  } catch {
    kind = null;
  }
  kinds.set(path, kind);
  return kind;
}

/** The real path of `dir/name` when it is a regular file (links followed) of the ELF kind of `like`; else null. */
export function libraryIn(dir: string, name: string, like: string): string | null {
  const path = join(dir, name);
  try {
    if (!statSync(path).isFile()) return null;
  } catch {
    return null;
  }
  const kind = elfKind(path);
  return kind !== null && kind === elfKind(like) ? realpathSync(path) : null;
}

/** The names of the libraries (`*.so`, `*.so.*`) a directory holds; none when it cannot be read. */
export function libraryNames(dir: string): string[] {
  try {
    return readdirSync(dir)
      .filter((name) => /\.so(\.|$)/.test(name))
      .sort();
  } catch {
    return [];
  }
}

/** Whether two existing files are one library: the same real path, or the same bytes. */
export function sameLibrary(a: string, b: string): boolean {
  const [ra, rb] = [realpathSync(a), realpathSync(b)];
  if (ra === rb) return true;
  if (statSync(ra).size !== statSync(rb).size) return false;
  return readFileSync(ra).equals(readFileSync(rb));
}
