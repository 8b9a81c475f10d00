// --ignore-missing: Python's fnmatch rules (each row's answer is Python 3's fnmatch.fnmatch(name,
// pattern) on Linux), and which names of a missing dependency the patterns are matched against.

import { describe, expect, it } from 'vitest';
import { type ByteString, textToByteString } from '../../src/elf/byte-string.js';
import { ascii } from '../helpers/byte-strings.js';

/** Names are written here as ASCII text. */
const all = (texts: readonly string[]): ByteString[] => ascii<ByteString[]>(texts);
import { fnmatch, ignoreMissingMatcher } from '../../src/resolve/ignore-missing.js';

describe("fnmatch, as Python's", () => {
  it.each([
    // Literal names, `*` and `?`.
    ['libcuda.so.1', 'libcuda.so.1', true],
    ['libcuda.so.1', 'libcuda.so', false],
    ['libcuda.so*', 'libcuda.so.1', true],
    ['libcuda.so*', 'libcuda.so', true],
    ['*', 'any(a, b)', true],
    ['*', '', true],
    ['', '', true],
    ['', 'a', false],
    ['lib?.so', 'libz.so', true],
    ['lib?.so', 'libzz.so', false],
    ['lib?.so', 'lib.so', false],
    ['lib?.so', 'libé.so', true],
    ['lib?.so', 'lib\n.so', true],
    ['*.so.*', 'libz.so.1', true],
    ['*.so.*', 'libz.so', false],
    ['**z', 'aaz', true],
    ['a*b*c', 'axxbyyc', true],
    ['a*b*c', 'axxbyy', false],
    // Case counts; `/` is a character like any other.
    ['libnv*', 'LIBNVIDIA.so', false],
    ['LIBNV*', 'libnvidia.so', false],
    ['*/x', 'a/x', true],
    ['a*', 'a/b', true],
    // Sets, complements and ranges.
    ['lib[ab].so', 'liba.so', true],
    ['lib[ab].so', 'libc.so', false],
    ['lib[!ab].so', 'libc.so', true],
    ['lib[!ab].so', 'liba.so', false],
    ['lib[a-c].so', 'libb.so', true],
    ['lib[a-c].so', 'libd.so', false],
    ['lib.so.[0-9]', 'lib.so.7', true],
    // A reversed range holds nothing; its complement everything.
    ['lib[c-a].so', 'libb.so', false],
    ['lib[c-a].so', 'libc.so', false],
    ['lib[!c-a].so', 'libx.so', true],
    // `]` first, `-` at either end or after a range: members.
    ['lib[]].so', 'lib].so', true],
    ['lib[!]].so', 'lib].so', false],
    ['lib[!]].so', 'libx.so', true],
    ['lib[a-].so', 'lib-.so', true],
    ['lib[-a].so', 'lib-.so', true],
    ['lib[a-c-e].so', 'lib-.so', true],
    ['lib[a-c-e].so', 'libd.so', false],
    // A `[` without its `]` is itself; there are no escapes; regular expression syntax is plain text.
    ['lib[.so', 'lib[.so', true],
    ['lib[!.so', 'lib[!.so', true],
    ['lib[].so', 'lib[].so', true],
    ['lib\\*.so', 'lib\\x.so', true],
    ['lib\\*.so', 'lib*.so', false],
    ['lib[\\].so', 'lib\\.so', true],
    ['lib^$.so', 'lib^$.so', true],
    ['lib(x)|y.so', 'lib(x)|y.so', true],
  ])('%j matches %j: %s', (pattern, name, matches) => {
    expect(fnmatch(name, pattern)).toBe(matches);
  });
});

describe('which missing dependencies --ignore-missing ignores', () => {
  it('matches the file name of each alternative, against each pattern', () => {
    const ignored = ignoreMissingMatcher(['libcuda.so*', 'libnvrm_*.so']);
    expect(ignored(all(['libcuda.so.1']))).toBe(true);
    expect(ignored(all(['/usr/lib/libcuda.so.1']))).toBe(true);
    expect(ignored(all(['libnvrm_gpu.so']))).toBe(true);
    expect(ignored(all(['libz.so.1']))).toBe(false);
    // A dlopen dependency: any of its alternatives.
    expect(ignored(all(['libbpf.so.1', 'libcuda.so']))).toBe(true);
    expect(ignored(all(['libbpf.so.1', 'libbpf.so.0']))).toBe(false);
  });

  it('no pattern ignores nothing; `*` (autoPatchelfIgnoreMissingDeps = true) everything', () => {
    expect(ignoreMissingMatcher([])(all(['libz.so.1']))).toBe(false);
    expect(ignoreMissingMatcher(['*'])(all(['libz.so.1']))).toBe(true);
    expect(ignoreMissingMatcher(['*'])(all(['libbpf.so.1', 'libbpf.so.0']))).toBe(true);
  });

  it('matches names as the text their bytes spell', () => {
    expect(ignoreMissingMatcher(['lib?.so'])([textToByteString('libé.so')])).toBe(true);
    expect(ignoreMissingMatcher(['libé.so'])([textToByteString('libé.so')])).toBe(true);
  });
});
