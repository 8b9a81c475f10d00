// Folds the ordered hooks into one runpath per file, remembering which hook contributed each entry.

import { resolve, sep } from 'node:path';
import picomatch from 'picomatch';
import type { ByteString } from '../elf/byte-string.js';
import { dedupeEntries, joinRunpath, runpathFields, splitRunpath } from '../elf/runpath-list.js';
import type { FileFacts, FileSelector, Hook, RunpathTransform, TracedEntry } from './hook.js';
import { normalizeRunpathEntry } from './runpath-entry.js';
import { stubsMatcher } from './stubs-pattern.js';

/**
 * - `default`: the Nixpkgs order, with duplicate and empty entries dropped (first occurrence wins;
 *   `/a//b/` and `/a/b` are one entry).
 * - `nixpkgs-compat`: byte-identical to running each Nixpkgs hook's `patchelf --set-rpath "<dir>:$old"`
 *   in turn: no dedupe, and an empty old runpath leaves a trailing `:`.
 */
export type Semantics = 'default' | 'nixpkgs-compat';

export interface ComposedRunpath {
  readonly value: ByteString;
  readonly entries: readonly TracedEntry[];
  /** The hooks that applied to this file, in order. */
  readonly applied: readonly string[];
}

/** A selector's globs compiled and its directories resolved, once per selector, not per file. */
interface CompiledSelector {
  readonly include: ((path: string) => boolean) | null;
  readonly exclude: ((path: string) => boolean) | null;
  readonly excludeUnder: readonly string[];
}

/** Compiled once per selector (hooks travel to worker threads as plain data). */
const compiledSelectors = new WeakMap<FileSelector, CompiledSelector>();

function compiledSelector(selector: FileSelector): CompiledSelector {
  let compiled = compiledSelectors.get(selector);
  if (compiled === undefined) {
    const globs = (patterns: readonly string[] | undefined): ((path: string) => boolean) | null =>
      patterns === undefined || patterns.length === 0 ? null : picomatch([...patterns], { dot: true });
    compiled = {
      include: globs(selector.include),
      exclude: globs(selector.exclude),
      excludeUnder: (selector.excludeUnder ?? []).map((dir) => resolve(dir)),
    };
    compiledSelectors.set(selector, compiled);
  }
  return compiled;
}

function selects(selector: FileSelector, file: FileFacts): boolean {
  if (selector.sharedObjectsOnly && !file.isSharedObject) return false;
  const { include, exclude, excludeUnder } = compiledSelector(selector);
  if (include !== null && !include(file.relativePath)) return false;
  if (exclude?.(file.relativePath)) return false;
  if (excludeUnder.length === 0) return true;
  const absolute = resolve(file.path);
  return !excludeUnder.some((dir) => absolute === dir || absolute.startsWith(dir + sep));
}

/** Nixpkgs substitutes one driver link per derivation; only the default picks one per file's machine. */
function dirsFor(hook: Hook, file: FileFacts, semantics: Semantics): readonly ByteString[] {
  if (hook.transform.kind === 'remove-matching' || hook.transform.kind === 'remove-pattern') return [];
  return (semantics === 'default' ? hook.machineDirs?.get(file.machine) : undefined) ?? hook.transform.dirs;
}

type ReplaceMatching = Extract<RunpathTransform, { kind: 'replace-matching' }>;
type PatternTransform = Extract<RunpathTransform, { patterns: readonly ByteString[] }>;

/** Compiled once per transform (hooks travel to worker threads as plain data). */
const matchers = new WeakMap<PatternTransform, (entry: ByteString) => boolean>();

/** The stubs patterns' rules (stubsMatcher) are those of every transform with shell-style patterns. */
function matcherOf(transform: PatternTransform): (entry: ByteString) => boolean {
  const known = matchers.get(transform);
  if (known !== undefined) return known;
  const matcher = stubsMatcher(transform.patterns);
  matchers.set(transform, matcher);
  return matcher;
}

/**
 * Nixpkgs' stubs hook reads the runpath back with `mapfile -d ':'`, which drops the empty entry after
 * a trailing ':' (and sees no entry at all in an empty runpath); it then writes the entries joined.
 */
function asReadByMapfile(entries: TracedEntry[]): TracedEntry[] {
  return entries.length > 0 && entries[entries.length - 1]?.dir === '' ? entries.slice(0, -1) : entries;
}

function replaceMatching(
  entries: TracedEntry[],
  transform: ReplaceMatching,
  added: readonly TracedEntry[],
  semantics: Semantics,
): TracedEntry[] {
  const matches = matcherOf(transform);
  const spelling = semantics === 'default' ? normalizeRunpathEntry : (dir: ByteString): ByteString => dir;
  const replacements = new Set(added.map((entry) => spelling(entry.dir)));
  let replaced = false;
  const result: TracedEntry[] = [];
  for (const entry of semantics === 'nixpkgs-compat' ? asReadByMapfile(entries) : entries) {
    if (matches(entry.dir)) {
      if (!replaced) result.push(...added);
      replaced = true;
    } else {
      result.push(entry);
      if (replacements.has(spelling(entry.dir))) replaced = true;
    }
  }
  return result;
}

/** A replacement run that changes no directory changes none the next time either. */
function sameDirs(a: readonly TracedEntry[], b: readonly TracedEntry[]): boolean {
  return a.length === b.length && a.every((entry, i) => entry.dir === b[i]?.dir);
}

/**
 * `runs` (≥ 1) runs of one hook in a row, as Nixpkgs gives a file with that many names. Built in one
 * pass instead of `runs` (a file with hundreds of names would otherwise cost its square): the added
 * entries repeated, one filtering (a second finds nothing more), replacements until one changes nothing.
 */
function applyHookRuns(entries: TracedEntry[], hook: Hook, file: FileFacts, semantics: Semantics, runs: number): TracedEntry[] {
  const added = dirsFor(hook, file, semantics).map((dir) => ({ dir, hook: hook.name }));
  const addedRuns = (): TracedEntry[] => Array.from({ length: runs }, () => added).flat();
  switch (hook.transform.kind) {
    case 'prepend':
      return [...addedRuns(), ...entries];
    case 'append':
      return [...entries, ...addedRuns()];
    case 'remove-matching': {
      const fragment = hook.transform.fragment;
      return entries.filter((entry) => !entry.dir.includes(fragment));
    }
    case 'remove-pattern': {
      const matches = matcherOf(hook.transform);
      return entries.filter((entry) => !matches(normalizeRunpathEntry(entry.dir)));
    }
    case 'replace-matching': {
      let result = entries;
      for (let run = 0; run < runs; run++) {
        const next = replaceMatching(result, hook.transform, added, semantics);
        const settled = sameDirs(next, result);
        result = next;
        if (settled) break;
      }
      return result;
    }
  }
}

/**
 * Returns null when no hook applies to the file. `current` is the file's runpath (null: none).
 * `names` is how many names the file has in the walked trees: Nixpkgs' walk lists every name of a
 * hard-linked file and patches the shared inode once per name, so in nixpkgs-compat each hook runs
 * that many times (the default runs each once: it patches an inode once).
 */
export function composeRunpath(
  orderedHooks: readonly Hook[],
  file: FileFacts,
  current: ByteString | null,
  semantics: Semantics,
  names = 1,
): ComposedRunpath | null {
  const applicable = orderedHooks.filter((hook) => selects(hook.files, file));
  if (applicable.length === 0) return null;
  // patchelf --print-rpath prints "" for no runpath, and "<dir>:" + "" is what Nixpkgs writes.
  const start = semantics === 'nixpkgs-compat' ? runpathFields(current) : splitRunpath(current);
  return foldHooks(
    applicable,
    file,
    start.map((dir) => ({ dir, hook: null })),
    semantics,
    names,
    [],
  );
}

/** The name the auto-patchelf resolver's entries are traced to. */
export const RESOLVER_HOOK_NAME = 'auto-patchelf';

/**
 * The hooks composed after the auto-patchelf resolver, which replaced the runpath with `resolved` (its
 * directories, traced to it, and the file's `$ORIGIN` entries it kept): whatever the order the hooks
 * were given in, the resolver runs first and the others prepend to, filter or replace in its result,
 * as Nixpkgs' hooks do when autoPatchelfHook is sourced first. `resolved` is not empty.
 */
export function composeAfterResolver(
  orderedHooks: readonly Hook[],
  file: FileFacts,
  resolved: readonly TracedEntry[],
  semantics: Semantics,
  names = 1,
): ComposedRunpath {
  const applicable = orderedHooks.filter((hook) => selects(hook.files, file));
  return foldHooks(applicable, file, [...resolved], semantics, names, [RESOLVER_HOOK_NAME]);
}

function foldHooks(
  applicable: readonly Hook[],
  file: FileFacts,
  start: TracedEntry[],
  semantics: Semantics,
  names: number,
  appliedBefore: readonly string[],
): ComposedRunpath {
  let entries = start;
  const repeat = semantics === 'nixpkgs-compat' ? names : 1;
  for (const hook of applicable) entries = applyHookRuns(entries, hook, file, semantics, repeat);
  if (semantics === 'default') entries = dedupeEntries(entries, (entry) => normalizeRunpathEntry(entry.dir));
  return {
    value: joinRunpath(entries.map((entry) => entry.dir)),
    entries,
    applied: [...appliedBefore, ...applicable.map((hook) => hook.name)],
  };
}

/**
 * Whether `current` is what one run of the hooks makes of some runpath, in nixpkgs-compat: there every
 * run prepends again, as Nixpkgs' patchelf sequence does, so `check` cannot ask whether `apply` would
 * change nothing. It asks whether the hooks' entries already lead (and, for appending hooks, end) the
 * runpath in hook order, with the rest as the hooks would leave it: the runpath with some leading and
 * trailing entries taken off must compose back to itself. `names` as for composeRunpath: one run
 * gives a file with three names in the trees each hook's entries three times.
 */
export function isOneHookRun(orderedHooks: readonly Hook[], file: FileFacts, current: ByteString, names = 1): boolean {
  const entries = runpathFields(current);
  const composesBack = (lead: number, trail: number): boolean =>
    composeRunpath(orderedHooks, file, joinRunpath(entries.slice(lead, entries.length - trail)), 'nixpkgs-compat', names)?.value ===
    current;
  const { growth, afterOwn } = runGrowth(orderedHooks, names);
  // A run lengthens a runpath by at most `growth` entries, so a slice that leaves out more cannot
  // compose back to `current`; nor can the empty slice (read as one empty entry) unless `current` has
  // at most growth + 1. Leading entries are left out first: that is where a run puts them.
  for (let lead = Math.min(growth, entries.length - 1); lead >= 0; lead--) {
    // A run goes from the first entry to the last, so the slices from `lead` compose to prefixes of
    // what the slice to the end composes to, up to what it adds after the runpath's own entries: one
    // composition rules out every trail of a lead.
    const composed = composeRunpath(orderedHooks, file, joinRunpath(entries.slice(lead)), 'nixpkgs-compat', names);
    if (composed === null) return false;
    const toEnd = runpathFields(composed.value);
    if (!entries.every((entry, i) => i >= entries.length - afterOwn || toEnd[i] === entry)) continue;
    for (let trail = 0; lead + trail <= growth && lead + trail < entries.length; trail++) if (composesBack(lead, trail)) return true;
  }
  return entries.length <= growth + 1 && composesBack(0, entries.length);
}

/**
 * What one nixpkgs-compat run of the hooks (each `names` times) adds at most to a runpath's length
 * (counted in entries: a hook's directories hold no ':', hookDirectory and the config refuse one;
 * `growth`), and of that what may come after the runpath's own entries (`afterOwn`: appended
 * directories, and a replacement's directories less the entry they take the place of). Prepended
 * entries come before them; filtering and dropping entries only shorten a runpath.
 */
function runGrowth(orderedHooks: readonly Hook[], names: number): { growth: number; afterOwn: number } {
  let prepended = 0;
  let afterOwn = 0;
  for (const { transform } of orderedHooks) {
    if (transform.kind === 'prepend') prepended += transform.dirs.length * names;
    else if (transform.kind === 'append') afterOwn += transform.dirs.length * names;
    else if (transform.kind === 'replace-matching') afterOwn += Math.max(0, transform.dirs.length - 1) * names;
  }
  return { growth: prepended + afterOwn, afterOwn };
}
