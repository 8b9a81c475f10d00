// The resolver's whole answer for one file, as data: how each dependency resolved, the list R of
// directories it adds (--runtime-dependencies for files with an interpreter, then each resolved
// dependency's directory in DT_NEEDED-then-dlopen order, then --append-rpaths; first occurrence kept),
// and the runpath it writes, in its base order. R empty: the runpath stays as it is.
// --nixpkgs-compat: R is the runpath (Nixpkgs' `patchelf --set-rpath`). Default: R in the file's own
// spellings, the file's kept `$ORIGIN` entries before --append-rpaths (runpath-spelling.ts); the order
// that the loader then opens what was chosen is runpath-order.ts's. The driver and cuda-compat hooks
// prepend to the result, as composed after it whatever the order the hooks were given in.

import type { ByteString } from '../elf/byte-string.js';
import type { DriverLibraryHooks } from './driver-libraries.js';
import type { LibraryIndex } from './library-index.js';
import { type DependencyFacts, type DependencyOutcome, resolveDependencies } from './resolve-dependencies.js';
import { usesOrigin } from '../elf/runpath-list.js';
import { ownDirectoryRanks, spellRunpath, type SpelledEntry } from './runpath-spelling.js';

/** What the resolver reads of a file (names and entries are byte strings). */
export interface ResolverFileFacts extends DependencyFacts {
  /** The file's directory, absolute: what `$ORIGIN` stands for. */
  readonly directory: ByteString;
  /** PT_INTERP: --runtime-dependencies are for such files only. */
  readonly hasInterpreter: boolean;
  /** Its runpath entries before this hook: DT_RUNPATH, else DT_RPATH; empty when it has neither. */
  readonly runpath: readonly ByteString[];
}

export type ResolverSemantics =
  | {
      readonly kind: 'default';
      /** The hooks on in this run, for the driver library rule (both off: the rule finds nothing). */
      readonly driverHooks: DriverLibraryHooks;
      /** The trees' roots with --relative-to-tree, else empty. */
      readonly relativeToTrees: readonly ByteString[];
    }
  /** Nixpkgs' auto-patchelf exactly: no driver library rule, R replaces the runpath as it is. */
  | { readonly kind: 'nixpkgs-compat' };

export interface ResolverOptions {
  readonly semantics: ResolverSemantics;
  readonly keepLibc: boolean;
  /** Absolute directories, each in one spelling (the command line's), as are the index's. */
  readonly runtimeDependencies: readonly ByteString[];
  readonly appendRunpaths: readonly ByteString[];
}

/** What the resolver asks of the disk, so that it stays a function of its inputs. */
export interface ResolverFileSystem {
  /** Whether the libc directory holds this name; always false without a libc directory. */
  readonly inLibcDir: (name: ByteString) => boolean;
  /** Whether a name the libc directory holds counts as libc's for rule 2 (glibc-libraries.ts). */
  readonly libcOwns: (name: ByteString) => boolean;
  /** Whether an absolute path names a file that exists. */
  readonly isFile: (path: ByteString) => boolean;
  /** The canonical path of an existing file or directory, or null when there is none. */
  readonly realPath: (path: ByteString) => ByteString | null;
}

/** One directory of R: how it is written, and the dependencies it resolves (none for the command line's own). */
export interface ResolvedDirectory {
  readonly directory: ByteString;
  readonly entry: ByteString;
  readonly names: readonly ByteString[];
}

/**
 * Where an entry of the written runpath belongs: `first` (--runtime-dependencies) and `last`
 * (--append-rpaths) stay there; `own` entries (the file's, as it spells them) keep their order
 * (`ownIndex`: where each stood); `added` ones go where nothing they hold shadows the file's own.
 */
export type EntryPlace = 'first' | 'own' | 'added' | 'last';

export interface PlacedEntry {
  readonly entry: ByteString;
  readonly place: EntryPlace;
  /** Where it stood in the file's runpath, when it is one of the file's own entries. */
  readonly ownIndex: number | null;
}

export interface FileResolution {
  readonly dependencies: readonly DependencyOutcome[];
  /** R, in order. */
  readonly resolved: readonly ResolvedDirectory[];
  /** The file's `$ORIGIN` entries written beside R (default semantics). */
  readonly kept: readonly ByteString[];
  /**
   * The runpath this hook writes, in its base order (runtime dependencies, R's other directories, the
   * kept entries, --append-rpaths), or null when it leaves the runpath as it is (R empty).
   */
  readonly runpath: readonly PlacedEntry[] | null;
  /** The alternatives of each dependency nothing resolved. */
  readonly missing: readonly (readonly ByteString[])[];
}

export function resolveFile(
  file: ResolverFileFacts,
  index: LibraryIndex,
  options: ResolverOptions,
  fileSystem: ResolverFileSystem,
): FileResolution {
  const { semantics } = options;
  const dependencies = resolveDependencies(file, {
    index,
    keepLibc: options.keepLibc,
    driverHooks: semantics.kind === 'default' ? semantics.driverHooks : null,
    inLibcDir: fileSystem.inLibcDir,
    libcOwns: fileSystem.libcOwns,
    isFile: fileSystem.isFile,
    // The anchor knows no runpath of the file; the default semantics keep its $ORIGIN entries, whose copy the file finds first.
    ownRank:
      semantics.kind === 'nixpkgs-compat'
        ? () => null
        : ownDirectoryRanks({ fileDirectory: file.directory, currentRunpath: file.runpath, realPath: fileSystem.realPath }),
  });
  const missing = dependencies.flatMap((outcome) => (outcome.found === null ? [outcome.alternatives] : []));
  const namesByDirectory = new Map<ByteString, { names: ByteString[]; pinned: EntryPlace | null }>();
  const add = (directory: ByteString, name: ByteString | null, pinned: EntryPlace | null): void => {
    const known = namesByDirectory.get(directory) ?? { names: [], pinned };
    namesByDirectory.set(directory, known);
    if (name !== null && !known.names.includes(name)) known.names.push(name);
  };
  if (file.hasInterpreter) for (const directory of options.runtimeDependencies) add(directory, null, 'first');
  for (const { found } of dependencies) if (found?.by.rule === 'index') add(found.by.directory, found.name, null);
  for (const directory of options.appendRunpaths) add(directory, null, 'last');

  if (namesByDirectory.size === 0) return { dependencies, resolved: [], kept: [], runpath: null, missing };
  const directories = [...namesByDirectory.keys()];
  const spelled =
    semantics.kind === 'nixpkgs-compat'
      ? { spellings: directories.map((entry) => ({ entry, ownIndex: null })), kept: [] }
      : spellRunpath(directories, {
          fileDirectory: file.directory,
          currentRunpath: file.runpath,
          relativeToTrees: semantics.relativeToTrees,
          realPath: fileSystem.realPath,
        });
  const resolved = [...namesByDirectory].map(([directory, { names }], i) => ({
    directory,
    entry: spelled.spellings[i]?.entry ?? directory,
    names,
  }));
  // The file's own entries are those it keeps: its `$ORIGIN` ones. An absolute entry it had is
  // dropped and found again through the index (as Nixpkgs' --set-rpath drops it): it is added.
  const placed = (spelling: SpelledEntry, pinned: EntryPlace | null): PlacedEntry => {
    const own = spelling.ownIndex !== null && usesOrigin(spelling.entry);
    return { entry: spelling.entry, ownIndex: own ? spelling.ownIndex : null, place: pinned ?? (own ? 'own' : 'added') };
  };
  const pinnedOf = (i: number): EntryPlace | null => {
    const directory = directories[i];
    return directory === undefined ? null : (namesByDirectory.get(directory)?.pinned ?? null);
  };
  const all = spelled.spellings.map((spelling, i) => placed(spelling, pinnedOf(i)));
  // Base order: what comes first, the other directories of R, the kept entries, what comes last.
  const base = [
    ...all.filter((entry) => entry.place === 'first'),
    ...all.filter((entry) => entry.place === 'own' || entry.place === 'added'),
    ...spelled.kept.map((spelling) => placed(spelling, null)),
    ...all.filter((entry) => entry.place === 'last'),
  ];
  // One entry per spelling, where it first comes (two names of one directory are spelled alike).
  const runpath = base.filter((entry, i) => base.findIndex((other) => other.entry === entry.entry) === i);
  return { dependencies, resolved, kept: spelled.kept.map((spelling) => spelling.entry), runpath, missing };
}
