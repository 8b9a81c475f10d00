// Search path lists as the loader splits them (glibc elf/dl-load.c fillin_rpath, decompose_rpath and
// _dl_dst_substitute): $ORIGIN, $PLATFORM and $LIB substituted (also as ${…}), trailing slashes
// dropped and one added, an empty entry kept as the directory "" (the working directory: ld.so then
// tries the bare name), an entry naming an unknown origin dropped, and each directory once per list.

/** The values the dynamic string tokens stand for in one object's lists. */
export interface TokenValues {
  /** The directory of the object (l_origin), or null when the loader cannot tell it. */
  readonly origin: string | null;
  readonly platform: string;
  readonly lib: string;
}

/** Length of the token `name` at `input[at]` (just after '$'), braces included, or 0 when it is not that token. */
function tokenLength(input: string, at: number, name: string): number {
  const curly = input[at] === '{';
  const start = curly ? at + 1 : at;
  if (!input.startsWith(name, start)) return 0;
  const next = input[start + name.length];
  if (curly) return next === '}' ? name.length + 2 : 0;
  return next !== undefined && /[A-Za-z0-9_]/.test(next) ? 0 : name.length;
}

/** One entry with its tokens replaced; null when it names a token without a value (the loader drops it). */
export function substituteTokens(entry: string, values: TokenValues): string | null {
  let result = '';
  for (let i = 0; i < entry.length; i++) {
    if (entry[i] !== '$') {
      result += entry[i];
      continue;
    }
    const tokens: [string, string | null][] = [
      ['ORIGIN', values.origin],
      ['PLATFORM', values.platform],
      ['LIB', values.lib],
    ];
    const match = tokens.map(([name, value]) => ({ length: tokenLength(entry, i + 1, name), value })).find((t) => t.length > 0);
    if (match === undefined) {
      result += '$';
      continue;
    }
    if (match.value === null) return null;
    result += match.value;
    i += match.length;
  }
  return result;
}

/**
 * The directories of a list (DT_RPATH, DT_RUNPATH: separators ':'; LD_LIBRARY_PATH: ':;'), each ending
 * in '/' or the empty directory, in order, each once.
 */
export function splitSearchList(list: string, separators: string, values: TokenValues): string[] {
  if (list === '') return [];
  const directories: string[] = [];
  for (const entry of list.split(new RegExp(`[${separators}]`))) {
    let directory = '';
    if (entry !== '') {
      const substituted = substituteTokens(entry, values);
      if (substituted === null || substituted === '') continue;
      let length = substituted.length;
      while (length > 1 && substituted[length - 1] === '/') length--;
      directory = substituted.slice(0, length);
      if (!directory.endsWith('/')) directory += '/';
    }
    if (!directories.includes(directory)) directories.push(directory);
  }
  return directories;
}
