// The resolver's whole answer for one file, as data: how each dependency resolved, the list R of
// directories it adds (--runtime-dependencies for files with an interpreter, then each resolved
// dependency's directory in DT_NEEDED-then-dlopen order, then --append-rpaths; first occurrence kept),
// and the runpath it writes. R empty: the runpath stays as it is. --nixpkgs-compat: R is the runpath
// (Nixpkgs' `patchelf --set-rpath`). Default: R in the file's own spellings, then its kept `$ORIGIN`
// entries (runpath-spelling.ts). The driver and cuda-compat hooks then prepend to this, as composed
// after it whatever the order the hooks were given in.

import type { DriverLibraryHooks } from './driver-libraries.js';
import type { LibraryIndex } from './library-index.js';
import { type DependencyFacts, type DependencyOutcome, resolveDependencies } from './resolve-dependencies.js';
import { spellRunpath } from './runpath-spelling.js';

/** What the resolver reads of a file (names and entries are byte strings). */
export interface ResolverFileFacts extends DependencyFacts {
  /** The file's directory, absolute: what `$ORIGIN` stands for. */
  readonly directory: string;
  /** PT_INTERP: --runtime-dependencies are for such files only. */
  readonly hasInterpreter: boolean;
  /** Its runpath entries before this hook: DT_RUNPATH, else DT_RPATH; empty when it has neither. */
  readonly runpath: readonly string[];
}

export type ResolverSemantics =
  | {
      readonly kind: 'default';
      /** The hooks on in this run, for the driver library rule (both off: the rule finds nothing). */
      readonly driverHooks: DriverLibraryHooks;
      /** The trees' roots with --relative-to-tree, else empty. */
      readonly relativeToTrees: readonly string[];
    }
  /** Nixpkgs' auto-patchelf exactly: no driver library rule, R replaces the runpath as it is. */
  | { readonly kind: 'nixpkgs-compat' };

export interface ResolverOptions {
  readonly semantics: ResolverSemantics;
  readonly keepLibc: boolean;
  /** Absolute directories, each in one spelling (the command line's), as are the index's. */
  readonly runtimeDependencies: readonly string[];
  readonly appendRunpaths: readonly string[];
}

/** What the resolver asks of the disk, so that it stays a function of its inputs. */
export interface ResolverFileSystem {
  /** Whether the libc directory holds this name; always false without a libc directory. */
  readonly inLibcDir: (name: string) => boolean;
  /** Whether an absolute path names a file that exists. */
  readonly isFile: (path: string) => boolean;
  /** The canonical path of an existing file or directory, or null when there is none. */
  readonly realPath: (path: string) => string | null;
}

/** One directory of R: how it is written, and the dependencies it resolves (none for the command line's own). */
export interface ResolvedDirectory {
  readonly directory: string;
  readonly entry: string;
  readonly names: readonly string[];
}

export interface FileResolution {
  readonly dependencies: readonly DependencyOutcome[];
  /** R, in order. */
  readonly resolved: readonly ResolvedDirectory[];
  /** The file's `$ORIGIN` entries written after R (default semantics). */
  readonly kept: readonly string[];
  /** The runpath this hook writes, or null when it leaves the runpath as it is (R empty). */
  readonly runpath: readonly string[] | null;
  /** The alternatives of each dependency nothing resolved. */
  readonly missing: readonly (readonly string[])[];
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
    isFile: fileSystem.isFile,
  });
  const missing = dependencies.flatMap((outcome) => (outcome.found === null ? [outcome.alternatives] : []));
  const namesByDirectory = new Map<string, string[]>();
  const add = (directory: string, name: string | null): void => {
    const names = namesByDirectory.get(directory) ?? [];
    namesByDirectory.set(directory, names);
    if (name !== null && !names.includes(name)) names.push(name);
  };
  if (file.hasInterpreter) for (const directory of options.runtimeDependencies) add(directory, null);
  for (const { found } of dependencies) if (found?.by.rule === 'index') add(found.by.directory, found.name);
  for (const directory of options.appendRunpaths) add(directory, null);

  if (namesByDirectory.size === 0) return { dependencies, resolved: [], kept: [], runpath: null, missing };
  const directories = [...namesByDirectory.keys()];
  const spelled =
    semantics.kind === 'nixpkgs-compat'
      ? { spellings: directories, kept: [], entries: directories }
      : spellRunpath(directories, {
          fileDirectory: file.directory,
          currentRunpath: file.runpath,
          relativeToTrees: semantics.relativeToTrees,
          realPath: fileSystem.realPath,
        });
  const resolved = [...namesByDirectory].map(([directory, names], i) => ({ directory, entry: spelled.spellings[i] ?? directory, names }));
  return { dependencies, resolved, kept: spelled.kept, runpath: spelled.entries, missing };
}
