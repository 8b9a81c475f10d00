// How the default semantics write the resolver's directories into a file's runpath without losing
// what makes the file relocatable. Each directory keeps the spelling the file already has for it
// (`$ORIGIN/../lib` stays `$ORIGIN/../lib` when that is where the library was found), else becomes
// `$ORIGIN/…` when --relative-to-tree asks and it is inside the file's tree, else is written absolute.
// The file's other `$ORIGIN` entries are kept ("kept": its package's own directories, which plugins it
// dlopens may need); its other entries go, as Nixpkgs' --set-rpath drops them. Each entry says whether
// it is the file's own, and where it stood: the order (runpath-order.ts) keeps the own entries' order.

import {
  asciiByteString,
  type ByteString,
  concatByteStrings,
  joinByteStrings,
  normalizeBytePath,
  relativeBytePath,
  sliceByteString,
  splitByteString,
} from '../elf/byte-string.js';
import { ORIGIN_TOKEN, usesOrigin } from '../elf/runpath-list.js';

const SLASH = asciiByteString('/');
const ORIGIN = asciiByteString('$ORIGIN');
const ORIGIN_SLASH = asciiByteString('$ORIGIN/');

export interface SpellingInputs {
  /** The file's directory, absolute: what `$ORIGIN` stands for. */
  readonly fileDirectory: ByteString;
  /** The file's runpath entries before this hook (DT_RUNPATH, else DT_RPATH). */
  readonly currentRunpath: readonly ByteString[];
  /** The trees' roots when --relative-to-tree is on, else empty. Compared as written with the directories. */
  readonly relativeToTrees: readonly ByteString[];
  /** The canonical path of an existing file or directory, or null when there is none. */
  readonly realPath: (path: ByteString) => ByteString | null;
}

/** An entry to write, and where it stood in the file's runpath when it is the file's own (null: added). */
export interface SpelledEntry {
  readonly entry: ByteString;
  readonly ownIndex: number | null;
}

export interface SpelledRunpath {
  /** For each directory given, in order, the entry that names it. */
  readonly spellings: readonly SpelledEntry[];
  /** The file's `$ORIGIN` entries kept beside them, in the file's order. */
  readonly kept: readonly SpelledEntry[];
}

/**
 * The absolute directory an entry names, `$ORIGIN` substituted, or null when a string cannot tell it:
 * a relative entry (searched from the working directory), or one with another token (`$LIB`, `$PLATFORM`).
 */
function directoryNamedBy(entry: ByteString, fileDirectory: ByteString): ByteString | null {
  const expanded = joinByteStrings(splitByteString(entry, ORIGIN_TOKEN), fileDirectory);
  return expanded.startsWith('/') && !expanded.includes('$') ? expanded : null;
}

/** Lexical spelling of a path that does not exist: `.` and `..` folded, no trailing `/`. */
function lexicalPath(path: ByteString): ByteString {
  const normalized = normalizeBytePath(path);
  return normalized.length > 1 && normalized.endsWith('/') ? sliceByteString(normalized, 0, -1) : normalized;
}

const isInside = (path: ByteString, root: ByteString): boolean =>
  path === root || path.startsWith(root.endsWith('/') ? root : concatByteStrings(root, SLASH));

/** `$ORIGIN/<relative>` for a directory in the same tree as the file, when --relative-to-tree is on. */
function treeRelativeSpelling(directory: ByteString, inputs: SpellingInputs): ByteString | null {
  const tree = inputs.relativeToTrees.find((root) => isInside(inputs.fileDirectory, root));
  if (tree === undefined || !isInside(directory, tree)) return null;
  const relative = relativeBytePath(inputs.fileDirectory, directory);
  return relative === '' ? ORIGIN : concatByteStrings(ORIGIN_SLASH, relative);
}

/**
 * Where the file's own `$ORIGIN` entries name a directory: its rank among them (the first entry 0), by
 * canonical path; null for a directory none names. The index prefers a copy there (resolve-dependencies.ts).
 */
export function ownDirectoryRanks(inputs: Omit<SpellingInputs, 'relativeToTrees'>): (directory: ByteString) => number | null {
  const identityOf = (path: ByteString): ByteString => inputs.realPath(path) ?? lexicalPath(path);
  const ranks = new Map<ByteString, number>();
  for (const entry of inputs.currentRunpath) {
    const named = usesOrigin(entry) ? directoryNamedBy(entry, inputs.fileDirectory) : null;
    if (named !== null && !ranks.has(identityOf(named))) ranks.set(identityOf(named), ranks.size);
  }
  return (directory) => (ranks.size === 0 ? null : (ranks.get(identityOf(directory)) ?? null));
}

/** The default semantics' runpath for a non-empty list of resolved directories (absolute, in one spelling each). */
export function spellRunpath(directories: readonly ByteString[], inputs: SpellingInputs): SpelledRunpath {
  // Two names of one directory are one directory: compare canonical paths where they exist.
  const identityOf = (path: ByteString): ByteString => inputs.realPath(path) ?? lexicalPath(path);
  const current = inputs.currentRunpath.map((entry, ownIndex) => {
    const named = directoryNamedBy(entry, inputs.fileDirectory);
    return { entry, ownIndex, identity: named === null ? null : identityOf(named) };
  });
  const spellingOf = new Map<ByteString, SpelledEntry>();
  const spellings = directories.map((directory) => {
    const identity = identityOf(directory);
    let spelling = spellingOf.get(identity);
    if (spelling === undefined) {
      const own = current.find((existing) => existing.identity === identity);
      spelling =
        own === undefined
          ? { entry: treeRelativeSpelling(directory, inputs) ?? directory, ownIndex: null }
          : { entry: own.entry, ownIndex: own.ownIndex };
      spellingOf.set(identity, spelling);
    }
    return spelling;
  });
  const kept: SpelledEntry[] = [];
  const seen = new Set(spellingOf.keys());
  for (const { entry, ownIndex, identity } of current) {
    if (!usesOrigin(entry)) continue;
    // A directory already written (its spelling was this entry, or another name of it) is not kept twice.
    const key = identity ?? entry;
    if (seen.has(key)) continue;
    seen.add(key);
    kept.push({ entry, ownIndex });
  }
  return { spellings, kept };
}
