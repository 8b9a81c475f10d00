// The libraries the resolver can point a runpath at: for each (file name, e_machine), the directories
// holding a library of that name, in the order the index walk found them, each with its OS ABI. The
// walk (which directories, in which order, what counts as a library) is the caller's; this is the data
// and its one lookup.

import type { ByteString } from '../elf/byte-string.js';
import { osAbisCompatible } from './os-abi.js';

/** One library found by the walk: the directory it is recorded under, and its OS ABI. */
export interface IndexedLibrary {
  readonly directory: ByteString;
  readonly osAbi: number;
}

/** What a lookup found: the first compatible library, and the next compatible one in another directory. */
export interface IndexMatch {
  readonly library: IndexedLibrary;
  /**
   * A later entry of the same name, in another directory, that this file could have used too: the first
   * one won by walk order alone, which the caller says in a warning (once per name).
   */
  readonly shadowed: IndexedLibrary | null;
}

/** Names are file names (not DT_SONAME), as byte strings; `/` cannot occur in one, so it separates the key. */
const keyOf = (name: ByteString, machine: number): string => `${machine}/${name}`;

export class LibraryIndex {
  private readonly libraries = new Map<string, IndexedLibrary[]>();

  /**
   * Records a library, after those recorded before it. The same name in the same directory again (the
   * walk reached that directory through a symbolic link's target) adds nothing.
   */
  add(name: ByteString, machine: number, library: IndexedLibrary): void {
    const key = keyOf(name, machine);
    const known = this.libraries.get(key);
    if (known === undefined) this.libraries.set(key, [library]);
    else if (!known.some((entry) => entry.directory === library.directory)) known.push(library);
  }

  /** Every library of this name and machine, in walk order. */
  entries(name: ByteString, machine: number): readonly IndexedLibrary[] {
    return this.libraries.get(keyOf(name, machine)) ?? [];
  }

  /**
   * The library of this name and machine whose OS ABI a file of `osAbi` can use: the first in walk
   * order, unless `preference` ranks another's directory before it (a lower rank first; null: unranked,
   * after every ranked one). Null when there is none.
   */
  lookup(
    name: ByteString,
    machine: number,
    osAbi: number,
    preference: (directory: ByteString) => number | null = () => null,
  ): IndexMatch | null {
    const compatible = this.entries(name, machine).filter((entry) => osAbisCompatible(osAbi, entry.osAbi));
    const ranked = compatible
      .map((library, walkOrder) => ({ library, walkOrder, rank: preference(library.directory) ?? Number.POSITIVE_INFINITY }))
      .sort((a, b) => a.rank - b.rank || a.walkOrder - b.walkOrder);
    const [first, next] = ranked;
    // add() keeps one entry per directory, so a second compatible entry is in another directory.
    return first === undefined ? null : { library: first.library, shadowed: next?.library ?? null };
  }
}
