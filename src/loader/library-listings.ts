// The libraries a directory holds, as doctor and the proof of a runpath ask it of the emulated system:
// the names with `.so` in them (what a loader search can be asked for), in byte order, each directory
// listed once per run.

import { readdirSync } from 'node:fs';
import { type ByteString, bytesToByteString } from '../elf/elf.js';
import type { SystemRoot } from './system-root.js';

/** What a loader search can be asked for, and what auto-patchelf.py indexes (`*.so*`): a name with `.so` in it. */
export const isLibraryName = (name: string): boolean => name.includes('.so');

export class LibraryListings {
  private readonly root: SystemRoot;
  private readonly listed = new Map<ByteString, ReadonlySet<ByteString>>();

  constructor(root: SystemRoot) {
    this.root = root;
  }

  /** The library names in `directory` (a path of the emulated system), in byte order; none when it cannot be listed. */
  namesIn(directory: ByteString): ReadonlySet<ByteString> {
    let names = this.listed.get(directory);
    if (names === undefined) {
      const found = this.root.lookUp(directory);
      let entries: ByteString[] = [];
      try {
        entries = found.ok && found.stats.isDirectory() ? readdirSync(found.hostPath, { encoding: 'buffer' }).map(bytesToByteString) : [];
      } catch {
        // A directory that cannot be listed holds nothing to tell; the loader's own search still reports it.
      }
      names = new Set(entries.filter(isLibraryName).sort());
      this.listed.set(directory, names);
    }
    return names;
  }
}
