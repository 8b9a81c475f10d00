// Which libraries are glibc's own (src/loader/glibc-libraries.ts): glibc's sonames and loaders count,
// what other packages install beside them in a Debian lib directory does not; a directory of glibc
// alone (Nix's glibc lib/, with libgcc_s) is told from one that holds more.

import { describe, expect, it } from 'vitest';
import { holdsOnlyGlibc, isGlibcLibrary } from '../../src/loader/glibc-libraries.js';
import type { ByteString } from '../../src/elf/byte-string.js';
import { ascii } from '../helpers/byte-strings.js';

/** Names are written here as ASCII text. */
const b = (text: string): ByteString => ascii<ByteString>(text);

describe("glibc's own libraries", () => {
  it.each([
    ['libc.so.6', true],
    ['libm.so.6', true],
    ['libpthread.so.0', true],
    ['libdl.so.2', true],
    ['librt.so.1', true],
    ['libresolv.so.2', true],
    ['libnss_files.so.2', true],
    ['libmvec.so.1', true],
    ['ld-linux-x86-64.so.2', true],
    ['ld-linux-aarch64.so.1', true],
    ['ld-linux.so.2', true],
    ['ld64.so.2', true],
    // libxcrypt, libnsl2 and systemd install these beside glibc on Debian.
    ['libcrypt.so.1', false],
    ['libnsl.so.2', false],
    ['libnss_systemd.so.2', false],
    ['libstdc++.so.6', false],
    ['libgcc_s.so.1', false],
    ['liblzma.so.5', false],
    ['libcudnn_graph.so.9', false],
    ['libc.so.7', false],
  ])('%s is glibc’s: %s', (name, glibc) => {
    expect(isGlibcLibrary(b(name))).toBe(glibc);
  });
});

describe('a directory of glibc alone', () => {
  it("Nix's glibc lib/: glibc's libraries, their link-time names, and libgcc_s", () => {
    expect(
      holdsOnlyGlibc(['ld-linux-x86-64.so.2', 'libc.so.6', 'libc.so', 'libm.so.6', 'libm.so', 'libgcc_s.so.1', 'libpcprofile.so'].map(b)),
    ).toBe(true);
  });

  it("Debian's /usr/lib/x86_64-linux-gnu holds more", () => {
    expect(holdsOnlyGlibc(['libc.so.6', 'libm.so.6', 'libstdc++.so.6'].map(b))).toBe(false);
    expect(holdsOnlyGlibc(['libc.so.6', 'libtorch.so'].map(b))).toBe(false);
  });
});
