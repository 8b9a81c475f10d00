// Folds the ordered hooks into one runpath per file, remembering which hook contributed each entry.

import { resolve, sep } from 'node:path';
import picomatch from 'picomatch';
import type { FileFacts, FileSelector, Hook, TracedEntry } from './hook.js';

/**
 * - `default`: the Nixpkgs order, with duplicate and empty entries dropped (first occurrence wins).
 * - `nixpkgs-compat`: byte-identical to running each Nixpkgs hook's `patchelf --set-rpath "<dir>:$old"`
 *   in turn: no dedupe, and an empty old runpath leaves a trailing `:`.
 */
export type Semantics = 'default' | 'nixpkgs-compat';

export interface ComposedRunpath {
  readonly value: string;
  readonly entries: readonly TracedEntry[];
  /** The hooks that applied to this file, in order. */
  readonly applied: readonly string[];
}

function selects(selector: FileSelector, file: FileFacts): boolean {
  if (selector.sharedObjectsOnly && !file.isSharedObject) return false;
  if (selector.include !== undefined && selector.include.length > 0 && !picomatch.isMatch(file.relativePath, [...selector.include], { dot: true })) return false;
  if (selector.exclude !== undefined && picomatch.isMatch(file.relativePath, [...selector.exclude], { dot: true })) return false;
  const absolute = resolve(file.path);
  return !(selector.excludeUnder ?? []).some((dir) => absolute === resolve(dir) || absolute.startsWith(resolve(dir) + sep));
}

/** Nixpkgs substitutes one driver link per derivation; only the default picks one per file's machine. */
function dirsFor(hook: Hook, file: FileFacts, semantics: Semantics): readonly string[] {
  if (hook.transform.kind === 'remove-matching') return [];
  return (semantics === 'default' ? hook.machineDirs?.get(file.machine) : undefined) ?? hook.transform.dirs;
}

function applyHook(entries: TracedEntry[], hook: Hook, file: FileFacts, semantics: Semantics): TracedEntry[] {
  const added = dirsFor(hook, file, semantics).map((dir) => ({ dir, hook: hook.name }));
  switch (hook.transform.kind) {
    case 'prepend':
      return [...added, ...entries];
    case 'append':
      return [...entries, ...added];
    case 'remove-matching': {
      const fragment = hook.transform.fragment;
      return entries.filter((entry) => !entry.dir.includes(fragment));
    }
  }
}

/**
 * Returns null when no hook applies to the file. `current` is the file's runpath (null: none).
 * `names` is how many names the file has in the walked trees: Nixpkgs' walk lists every name of a
 * hard-linked file and patches the shared inode once per name, so in nixpkgs-compat each hook runs
 * that many times (the default runs each once: it patches an inode once).
 */
export function composeRunpath(orderedHooks: readonly Hook[], file: FileFacts, current: string | null, semantics: Semantics, names = 1): ComposedRunpath | null {
  const applicable = orderedHooks.filter((hook) => selects(hook.files, file));
  if (applicable.length === 0) return null;
  // patchelf --print-rpath prints "" for no runpath, and "<dir>:" + "" is what Nixpkgs writes.
  const start = semantics === 'nixpkgs-compat' ? (current ?? '').split(':') : current === null || current === '' ? [] : current.split(':');
  let entries: TracedEntry[] = start.map((dir) => ({ dir, hook: null }));
  const repeat = semantics === 'nixpkgs-compat' ? names : 1;
  for (const hook of applicable) for (let i = 0; i < repeat; i++) entries = applyHook(entries, hook, file, semantics);
  if (semantics === 'default') {
    const seen = new Set<string>();
    entries = entries.filter((entry) => entry.dir !== '' && !seen.has(entry.dir) && seen.add(entry.dir) !== undefined);
  }
  return { value: entries.map((entry) => entry.dir).join(':'), entries, applied: applicable.map((hook) => hook.name) };
}
