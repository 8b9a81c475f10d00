// The auto-patchelf resolver's library index, built from the disk before any file is planned
// (docs/auto-patchelf.md, "The index"): a worklist of directories, each scanned once by its real path,
// every library named `*.so*` recorded under its file name and machine in the order the walk meets
// it. The walk reads each directory's names sorted, so the index is the same every run.

import { realpathSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { byteStringToText, textToByteString, usesOrigin } from '../elf/elf.js';
import { isLibraryName } from '../loader/library-listings.js';
import { LibraryIndex } from '../resolve/library-index.js';
import { walkTrees } from '../walk/walk-trees.js';
import { type LibraryFacts, readLibraryFacts } from './resolver-facts.js';

/** The real path, or null where there is none (a dangling link, a name gone). */
export function realPathOf(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

/**
 * The directory a library found at `path` is recorded under: its own, or for a symbolic link whose name
 * is its target's name, the target's (a link named otherwise stands for its own directory's name).
 */
function recordedDirectory(path: string, isLink: boolean): string {
  if (!isLink) return dirname(path);
  const target = realPathOf(path);
  return target !== null && basename(target) === basename(path) ? dirname(target) : dirname(path);
}

export class LibraryIndexWalk {
  readonly index = new LibraryIndex();
  /** Real paths of the directories scanned (or being scanned: the trees). */
  private readonly scanned = new Set<string>();

  /** The trees count as scanned: a runpath that names one is not walked again. */
  constructor(trees: readonly string[]) {
    for (const tree of trees) this.scanned.add(realPathOf(tree) ?? tree);
  }

  /**
   * A library met at `path` (a walked file, or a symbolic link to follow): recorded when its name is a
   * library's and it is not a separate debug object; returns the runpath entries the index follows.
   */
  addLibrary(path: string, isLink: boolean, facts: LibraryFacts): string[] {
    if (!isLibraryName(basename(path)) || facts.skip === 'debug-info') return [];
    this.index.add(textToByteString(basename(path)), facts.machine, {
      directory: textToByteString(recordedDirectory(path, isLink)),
      osAbi: facts.osAbi,
    });
    // Entries relative to the library (`$ORIGIN`, `${ORIGIN}`) name no directory of their own to scan.
    return facts.runpath.filter((entry) => entry !== '' && !usesOrigin(entry)).map(byteStringToText);
  }

  /**
   * Scans the directories of the worklist in order, and those the runpaths of their libraries add
   * (after them, scanned the same way): recursively or not. A directory that does not exist is skipped
   * (Nix passes every dependency's lib/, many of which do not exist); so is a file that is not ELF.
   * A `--libs` path that is a file stands for itself.
   */
  async scan(directories: readonly string[], recursive: boolean): Promise<void> {
    const worklist = [...directories];
    for (let directory = worklist.shift(); directory !== undefined; directory = worklist.shift()) {
      const real = realPathOf(directory);
      if (real === null || this.scanned.has(real)) continue;
      this.scanned.add(real);
      for (const item of walkTrees([directory], { recursive })) {
        const isLink = item.kind === 'skip' && item.reason === 'symlink';
        if ((item.kind !== 'file' && !isLink) || !isLibraryName(basename(item.path))) continue;
        const facts = await readLibraryFacts(item.path);
        if (facts !== null) worklist.push(...this.addLibrary(item.path, isLink, facts));
      }
    }
  }
}
