// A hook is data: a name, what it does to a runpath, which files it applies to, and where its entries
// stand relative to other hooks' entries in the runpath. The engine (order-hooks.ts, compose-hooks.ts)
// orders hooks and folds them into one runpath per file; nothing here touches a file.

import type { ByteString } from '../elf/byte-string.js';

/** One runpath entry and the hook that put it there (null: it was in the file already). */
export interface TracedEntry {
  readonly dir: ByteString;
  readonly hook: string | null;
}

/** What a hook does to a runpath. Directories are byte strings. */
export type RunpathTransform =
  | { readonly kind: 'prepend'; readonly dirs: readonly ByteString[] }
  | { readonly kind: 'append'; readonly dirs: readonly ByteString[] }
  /** Drop entries whose directory contains this path fragment (e.g. `/build/`). */
  | { readonly kind: 'remove-matching'; readonly fragment: ByteString }
  /** Drop entries that, in one spelling (normalizeRunpathEntry), match one of `patterns` (shell-style, see stubs-pattern.ts). */
  | { readonly kind: 'remove-pattern'; readonly patterns: readonly ByteString[] }
  /**
   * Nixpkgs' stubs rule: the first entry matching one of `patterns` (shell-style, see stubs-pattern.ts)
   * becomes `dirs`, unless one of `dirs` came earlier; later matches are dropped.
   */
  | { readonly kind: 'replace-matching'; readonly patterns: readonly ByteString[]; readonly dirs: readonly ByteString[] };

/** What a hook may know about a file when deciding whether it applies. */
export interface FileFacts {
  /** Path relative to the tree root being walked, with `/` separators. */
  readonly relativePath: string;
  /** The absolute path. */
  readonly path: string;
  readonly isSharedObject: boolean;
  /** e_machine, for machine-specific directories (the driver's `-32` link for i386). */
  readonly machine: number;
}

export interface FileSelector {
  /** Only ET_DYN files without PT_INTERP. */
  readonly sharedObjectsOnly?: boolean;
  /** Globs on relative paths (picomatch syntax) a file must match, when given. */
  readonly include?: readonly string[];
  /** Globs on relative paths that exclude a file. */
  readonly exclude?: readonly string[];
  /** Absolute directories whose files the hook never touches (cuda_compat itself): text, as the walk's paths are. */
  readonly excludeUnder?: readonly string[];
}

export interface Hook {
  readonly name: string;
  /** The transform; `machineDirs` lets a hook pick a directory per machine (see builtin-hooks.ts). */
  readonly transform: RunpathTransform;
  /** Per-machine replacement of `transform`'s dirs (e_machine → dirs). */
  readonly machineDirs?: ReadonlyMap<number, readonly ByteString[]>;
  readonly files: FileSelector;
  /**
   * Hooks (by name) whose entries this hook's entries come before / after in the resulting runpath: its
   * position, not the order hooks run in (orderHooks derives that). `*`: every other hook that adds
   * entries at the same end (prepending or appending). Only for hooks that add entries.
   */
  readonly precedes: readonly string[];
  readonly follows: readonly string[];
}
