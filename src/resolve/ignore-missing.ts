// --ignore-missing: shell patterns on the name of a library the resolver could not find, with the
// rules of Python's fnmatch.fnmatch on POSIX, as Nixpkgs' auto-patchelf matches them. `*` is any run of
// characters and `?` any one, `/` included (a name is not a path here); `[…]` is a set, `[!…]` its
// complement, `a-z` a range inside one (a range whose ends are reversed holds nothing), a `]` right
// after `[` or `[!` and a `-` at either end are themselves; a `[` without its `]` is itself. No
// backslash escapes. Case counts. The whole name must match.

import { type ByteString, byteStringToText, sliceByteString } from '../elf/byte-string.js';

/** The characters that mean something in a regular expression (a `u` expression allows `\-` only inside a set). */
const SYNTAX = /[\\^$.*+?()[\]{}|/]/;
const escaped = (char: string): string => (SYNTAX.test(char) ? `\\${char}` : char);
const escapedInSet = (char: string): string => (char === '-' ? '\\-' : escaped(char));

/** The regular expression (code points, `.` matching newlines too) for one pattern. */
function patternRegExp(pattern: string): RegExp {
  const chars = Array.from(pattern);
  let source = '';
  for (let i = 0; i < chars.length; i++) {
    const char = chars[i] ?? '';
    if (char === '*') {
      // One `.*` for a run of stars: the same language, without the backtracking.
      if (chars[i - 1] !== '*') source += '.*';
    } else if (char === '?') {
      source += '.';
    } else if (char === '[') {
      const set = setAt(chars, i + 1);
      if (set === null) {
        source += '\\[';
      } else {
        source += set.source;
        i = set.end;
      }
    } else {
      source += escaped(char);
    }
  }
  return new RegExp(`^${source}$`, 'su');
}

/**
 * The set whose `[` is just before `start`: its regular expression and the index of its `]`, or null
 * when no `]` closes it.
 */
function setAt(chars: readonly string[], start: number): { source: string; end: number } | null {
  const negated = chars[start] === '!';
  let i = negated ? start + 1 : start;
  // A `]` first is a member, not the end.
  let end = chars[i] === ']' ? i + 1 : i;
  while (end < chars.length && chars[end] !== ']') end++;
  if (end >= chars.length) return null;
  let members = '';
  while (i < end) {
    const low = chars[i] ?? '';
    const high = chars[i + 2];
    if (chars[i + 1] === '-' && i + 2 < end && high !== undefined) {
      if ((low.codePointAt(0) ?? 0) <= (high.codePointAt(0) ?? 0)) members += `${escapedInSet(low)}-${escapedInSet(high)}`;
      i += 3;
    } else {
      members += escapedInSet(low);
      i += 1;
    }
  }
  if (members === '') return { source: negated ? '.' : '(?!)', end };
  return { source: `[${negated ? '^' : ''}${members}]`, end };
}

/** Python's fnmatch.fnmatchcase(name, pattern), which fnmatch.fnmatch is on POSIX. */
export function fnmatch(name: string, pattern: string): boolean {
  return patternRegExp(pattern).test(name);
}

/**
 * Whether a missing dependency is ignored: some alternative's file name (after the last `/`) matches
 * some pattern. The anchor matches one name per dependency, which for several alternatives (a
 * `.note.dlopen` entry) is the string `any(a, b)`, that only a pattern like `*` matches; matching each
 * alternative instead lets `--ignore-missing libfoo.so.1` silence the dependency that lists it.
 * Alternatives are byte strings, matched as the text they spell (UTF-8), as Python decodes them.
 */
/** Whether --ignore-missing silences a dependency, given as its alternatives. */
export type IgnoredMissing = (alternatives: readonly ByteString[]) => boolean;

export function ignoreMissingMatcher(patterns: readonly string[]): IgnoredMissing {
  const regExps = patterns.map(patternRegExp);
  return (alternatives) =>
    alternatives.some((alternative) => {
      const name = byteStringToText(sliceByteString(alternative, alternative.lastIndexOf('/') + 1));
      return regExps.some((regExp) => regExp.test(name));
    });
}
