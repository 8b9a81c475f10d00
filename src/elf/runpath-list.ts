// A runpath value (DT_RUNPATH, DT_RPATH) as the list of directories it is: entries separated by ':',
// an empty entry kept where the value has one (the loader reads it as the working directory). The
// single-file editors (plan/dynamic-editor.ts) and the hooks (hooks/compose-hooks.ts) split, join and
// dedupe runpaths here, and nowhere else.

/** `$ORIGIN` (not followed by a name character: `$ORIGINAL` is another token) or `${ORIGIN}`, as the loader reads them. */
export const ORIGIN_TOKEN = /\$(?:ORIGIN(?![A-Za-z0-9_])|\{ORIGIN\})/;

/** Whether an entry uses `$ORIGIN` or `${ORIGIN}` anywhere: the object's own package, wherever it is installed. */
export function usesOrigin(entry: string): boolean {
  return ORIGIN_TOKEN.test(entry);
}

/** A runpath's directories, in order; no runpath, or an empty one, has none. */
export function splitRunpath(value: string | null): string[] {
  return value === null || value === '' ? [] : value.split(':');
}

/**
 * Every ':'-separated field of a runpath, no runpath or an empty one being one empty field: the list
 * Nixpkgs' shell code sees in what `patchelf --print-rpath` prints, and builds `"<dir>:$old"` from.
 */
export function runpathFields(value: string | null): string[] {
  return (value ?? '').split(':');
}

export function joinRunpath(entries: readonly string[]): string {
  return entries.join(':');
}

/**
 * Each directory once, where it first comes, and no empty entry. `spelling` brings an entry to the
 * spelling compared (the entry itself when absent); an entry spelled '' is empty.
 */
export function dedupeEntries(entries: readonly string[]): string[];
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
