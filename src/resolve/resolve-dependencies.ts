// How each dependency of one file resolves: DT_NEEDED entries (one alternative each), then the
// `.note.dlopen` entries (alternatives, the preferred first). The first alternative that one of the
// rules finds wins, the rules tried in order for each alternative (docs/auto-patchelf.md):
//   1. an absolute path to a file that exists;
//   2. a library libc's directory provides, without --keep-libc: any library there when the directory
//      holds glibc alone (Nix's glibc lib/), only glibc's own when it holds more (glibc-libraries.ts);
//   3. a driver library, when the driver or cuda-compat hook provides it (default semantics only);
//   4. the index: the first library of that file name and the file's machine whose OS ABI goes with
//      the file's, unless one of the file's own `$ORIGIN` entries names the directory of another (the
//      first such entry's copy is the one the file's own runpath finds; default semantics); its
//      directory joins the runpath;
//   5. a name present in the libc directory (with --keep-libc, or not one of glibc's own).
// Only rule 4 adds a directory. Everything the rules need from the disk comes in as functions.

import { type ByteString, sliceByteString } from '../elf/byte-string.js';
import { type DriverLibraryHook, type DriverLibraryHooks, driverLibraryHook } from './driver-libraries.js';
import type { LibraryIndex } from './library-index.js';
import { libcAlwaysKept } from './os-abi.js';

/** The rule that found an alternative. */
export type FoundBy =
  | { readonly rule: 'absolute-path' }
  | { readonly rule: 'libc' }
  | { readonly rule: 'driver-library'; readonly hook: DriverLibraryHook }
  /**
   * `shadowed`: another directory of the index holds a library this file could have used; `ownRunpath`:
   * the file's own runpath names the directory chosen (else it came first in walk order).
   */
  | { readonly rule: 'index'; readonly directory: ByteString; readonly shadowed: ByteString | null; readonly ownRunpath: boolean }
  | { readonly rule: 'kept-libc' };

export interface DependencyOutcome {
  /** The names that can satisfy the dependency, as the file lists them (byte strings). */
  readonly alternatives: readonly ByteString[];
  /** The alternative that resolved and how; null: the dependency is missing. */
  readonly found: { readonly name: ByteString; readonly by: FoundBy } | null;
}

/** What the rules read of a file. */
export interface DependencyFacts {
  readonly machine: number;
  readonly osAbi: number;
  readonly needed: readonly ByteString[];
  readonly dlopen: readonly (readonly ByteString[])[];
}

export interface RuleInputs {
  readonly index: LibraryIndex;
  readonly keepLibc: boolean;
  /** The hooks rule 3 counts on; null turns the rule off (--nixpkgs-compat: the anchor has no such rule). */
  readonly driverHooks: DriverLibraryHooks | null;
  /** Whether the libc directory holds this name; always false when there is no libc directory. */
  readonly inLibcDir: (name: ByteString) => boolean;
  /** Whether a name the libc directory holds counts as libc's for rule 2 (glibc-libraries.ts). */
  readonly libcOwns: (name: ByteString) => boolean;
  /** Whether an absolute path names a file that exists. */
  readonly isFile: (path: ByteString) => boolean;
  /** Where the file's own `$ORIGIN` entries name a directory, their rank (first entry 0); null elsewhere. */
  readonly ownRank: (directory: ByteString) => number | null;
}

/** The file name of an alternative: the index, the driver list and the patterns know libraries by it. */
const fileNameOf = (alternative: ByteString): ByteString => sliceByteString(alternative, alternative.lastIndexOf('/') + 1);

/** Each dependency of the file, in DT_NEEDED-then-dlopen order, with how it resolved. */
export function resolveDependencies(file: DependencyFacts, inputs: RuleInputs): DependencyOutcome[] {
  const keepLibc = inputs.keepLibc || libcAlwaysKept(file.osAbi);
  const dependencies = [...file.needed.map((name) => [name]), ...file.dlopen];
  return dependencies.map((alternatives) => {
    for (const name of alternatives) {
      const by = findAlternative(name, file, keepLibc, inputs);
      if (by !== null) return { alternatives, found: { name, by } };
    }
    return { alternatives, found: null };
  });
}

function findAlternative(name: ByteString, file: DependencyFacts, keepLibc: boolean, inputs: RuleInputs): FoundBy | null {
  const absolute = name.startsWith('/');
  if (absolute && inputs.isFile(name)) return { rule: 'absolute-path' };
  // An absolute path that does not exist is looked up by its file name below, as the anchor does; the
  // libc directory holds it only under that same path, which was just found missing.
  const inLibc = !absolute && inputs.inLibcDir(name);
  if (inLibc && !keepLibc && inputs.libcOwns(name)) return { rule: 'libc' };
  const fileName = fileNameOf(name);
  const hook = inputs.driverHooks === null ? null : driverLibraryHook(fileName, inputs.driverHooks);
  if (hook !== null) return { rule: 'driver-library', hook };
  const match = inputs.index.lookup(fileName, file.machine, file.osAbi, inputs.ownRank);
  if (match !== null) {
    const { directory } = match.library;
    return { rule: 'index', directory, shadowed: match.shadowed?.directory ?? null, ownRunpath: inputs.ownRank(directory) !== null };
  }
  if (inLibc) return { rule: 'kept-libc' };
  return null;
}
