// A runpath value (DT_RUNPATH, DT_RPATH) as the list of directories it is: entries separated by ':',
// an empty entry kept where the value has one (the loader reads it as the working directory). The
// single-file editors (plan/dynamic-editor.ts) and the hooks (hooks/compose-hooks.ts) split, join and
// dedupe runpaths here, and nowhere else. A runpath and its entries are byte strings, as the file holds them.

import { asciiByteString, EMPTY_BYTE_STRING, joinByteStrings, splitByteString, type ByteString } from './byte-string.js';

const SEPARATOR = asciiByteString(':');

/** `$ORIGIN` (not followed by a name character: `$ORIGINAL` is another token) or `${ORIGIN}`, as the loader reads them. */
export const ORIGIN_TOKEN = /\$(?:ORIGIN(?![A-Za-z0-9_])|\{ORIGIN\})/;

/** Whether an entry uses `$ORIGIN` or `${ORIGIN}` anywhere: the object's own package, wherever it is installed. */
export function usesOrigin(entry: ByteString): boolean {
  return ORIGIN_TOKEN.test(entry);
}

/** A runpath's directories, in order; no runpath, or an empty one, has none. */
export function splitRunpath(value: ByteString | null): ByteString[] {
  return value === null || value === '' ? [] : splitByteString(value, SEPARATOR);
}

/**
 * Every ':'-separated field of a runpath, no runpath or an empty one being one empty field: the list
 * Nixpkgs' shell code sees in what `patchelf --print-rpath` prints, and builds `"<dir>:$old"` from.
 */
export function runpathFields(value: ByteString | null): ByteString[] {
  return splitByteString(value ?? EMPTY_BYTE_STRING, SEPARATOR);
}

export function joinRunpath(entries: readonly ByteString[]): ByteString {
  return joinByteStrings(entries, SEPARATOR);
}

/**
 * Each directory once, where it first comes, and no empty entry. `spelling` brings an entry to the
 * spelling compared (the entry itself when absent); an entry spelled '' is empty.
 */
export function dedupeEntries(entries: readonly ByteString[]): ByteString[];
export function dedupeEntries<T>(entries: readonly T[], spelling: (entry: T) => string): T[];
export function dedupeEntries<T>(entries: readonly T[], spelling?: (entry: T) => string): T[] {
  const seen = new Set<string>();
  return entries.filter((entry) => {
    const spelled = spelling === undefined ? String(entry) : spelling(entry);
    if (spelled === '' || seen.has(spelled)) return false;
    seen.add(spelled);
    return true;
  });
}
