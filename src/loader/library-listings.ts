// The libraries a directory holds, as doctor and the proof of a runpath ask it of the emulated system:
// the names with `.so` in them (what a loader search can be asked for), in byte order, from the
// directory's one listing of the run (candidate-files.ts), which the loader's searches use too.

import type { ByteString } from '../elf/elf.js';
import type { CandidateFiles } from './candidate-files.js';

/** What a loader search can be asked for, and what auto-patchelf.py indexes (`*.so*`): a name with `.so` in it. */
export const isLibraryName = (name: string): boolean => name.includes('.so');

export class LibraryListings {
  private readonly candidates: CandidateFiles;
  private readonly listed = new Map<ByteString, ReadonlySet<ByteString>>();

  constructor(candidates: CandidateFiles) {
    this.candidates = candidates;
  }

  /** The library names in `directory` (a path of the emulated system), in byte order; none when it cannot be listed. */
  namesIn(directory: ByteString): ReadonlySet<ByteString> {
    let names = this.listed.get(directory);
    if (names === undefined) {
      // A directory that cannot be listed holds nothing to tell; the loader's own search still reports it.
      const entries = this.candidates.entriesOf(directory) ?? [];
      names = new Set([...entries].filter(isLibraryName).sort());
      this.listed.set(directory, names);
    }
    return names;
  }
}
