// Search path lists as the loader splits them (glibc elf/dl-load.c fillin_rpath, decompose_rpath and
// _dl_dst_substitute): $ORIGIN, $PLATFORM and $LIB substituted (also as ${…}), trailing slashes
// dropped and one added, an empty entry kept as the directory "" (the working directory: ld.so then
// tries the bare name), an entry naming an unknown origin dropped, and each directory once per list.

import { asciiByteString, type ByteString, concatByteStrings, EMPTY_BYTE_STRING, sliceByteString, splitByteString } from '../elf/elf.js';

const SLASH = asciiByteString('/');

/** The values the dynamic string tokens stand for in one object's lists. */
export interface TokenValues {
  /** The directory of the object (l_origin), or null when the loader cannot tell it. */
  readonly origin: ByteString | null;
  readonly platform: ByteString;
  readonly lib: ByteString;
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

const TOKENS = ['ORIGIN', 'PLATFORM', 'LIB'] as const;

/** The token `$name` at `input[at]` (just after '$'): its length and value; null when no token starts there. */
function tokenAt(input: string, at: number, values: TokenValues): { readonly length: number; readonly value: ByteString | null } | null {
  for (const name of TOKENS) {
    const length = tokenLength(input, at, name);
    if (length > 0) return { length, value: name === 'ORIGIN' ? values.origin : name === 'PLATFORM' ? values.platform : values.lib };
  }
  return null;
}

/** One entry with its tokens replaced; null when it names a token without a value (the loader drops it). */
export function substituteTokens(entry: ByteString, values: TokenValues): ByteString | null {
  // Most entries are plain directories: nothing to substitute (the searches split lists per object).
  if (!entry.includes('$')) return entry;
  const parts: ByteString[] = [];
  /** Where the bytes not yet in `parts` start. */
  let start = 0;
  for (let i = 0; i < entry.length; i++) {
    if (entry[i] !== '$') continue;
    const token = tokenAt(entry, i + 1, values);
    if (token === null) continue;
    if (token.value === null) return null;
    parts.push(sliceByteString(entry, start, i), token.value);
    i += token.length;
    start = i + 1;
  }
  parts.push(sliceByteString(entry, start));
  return concatByteStrings(...parts);
}

/** The separators' pattern, made once per set of separators. */
const separatorPatterns = new Map<string, RegExp>();

/**
 * The directories of a list (DT_RPATH, DT_RUNPATH: separators ':'; LD_LIBRARY_PATH: ':;'), each ending
 * in '/' or the empty directory, in order, each once.
 */
export function splitSearchList(list: ByteString, separators: string, values: TokenValues): ByteString[] {
  if (list === '') return [];
  const directories: ByteString[] = [];
  let pattern = separatorPatterns.get(separators);
  if (pattern === undefined) {
    pattern = new RegExp(`[${separators}]`);
    separatorPatterns.set(separators, pattern);
  }
  for (const entry of splitByteString(list, pattern)) {
    let directory = EMPTY_BYTE_STRING;
    if (entry !== '') {
      const substituted = substituteTokens(entry, values);
      if (substituted === null || substituted === '') continue;
      let length = substituted.length;
      while (length > 1 && substituted[length - 1] === '/') length--;
      directory = sliceByteString(substituted, 0, length);
      if (!directory.endsWith('/')) directory = concatByteStrings(directory, SLASH);
    }
    if (!directories.includes(directory)) directories.push(directory);
  }
  return directories;
}
