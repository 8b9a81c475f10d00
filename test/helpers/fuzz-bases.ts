// The real files that mutation runs start from: small (thousands of copies are made), of each class,
// byte order and linker layout, with and without section headers, plus a few real Debian and CUDA
// libraries whose version records, symbol tables and string sharing come from real toolchains.

import { fixture, fixtures, type Fixture } from './fixtures.js';

type Predicate = (f: Fixture) => boolean;

/**
 * Compiled fixtures of each class and byte order and of each linker's layout, plus a .dynstr over
 * 16 KiB (read in chunks, not whole) and a file without section headers.
 */
const COMPILED_TARGETS: readonly [string, Predicate][] = [
  ...(['x86_64', 'aarch64', 'arm', 'ppc64'] as const).flatMap((arch): [string, Predicate][] => [
    [
      `${arch} library with a runpath`,
      (f) => f.arch === arch && f.kind === 'shared' && f.linker === 'bfd' && f.tags.includes('runpath') && f.tags.length === 1,
    ],
    [
      `${arch} PIE with a runpath`,
      (f) => f.arch === arch && f.kind === 'pie' && f.linker === 'bfd' && f.tags.includes('runpath') && f.tags.length === 1,
    ],
  ]),
  ['x86_64 executable with an rpath', (f) => f.arch === 'x86_64' && f.kind === 'exec' && f.tags.includes('rpath')],
  ['x86_64 library linked by lld', (f) => f.arch === 'x86_64' && f.kind === 'shared' && f.linker === 'lld'],
  ['x86_64 PIE linked by gold', (f) => f.arch === 'x86_64' && f.kind === 'pie' && f.linker === 'gold'],
  ['x86_64 library without section headers', (f) => f.arch === 'x86_64' && f.tags.includes('no-sections')],
  ['x86_64 library with a big .dynstr', (f) => f.arch === 'x86_64' && f.tags.includes('big-dynstr')],
];

/** Small real libraries from Debian 12 and CUDA 11.8: version needs and definitions, GNU hash, many symbols. */
const REAL_TARGETS: readonly string[] = [
  'debian/x86_64/libc6/libdl.so.2',
  'debian/x86_64/libc6/libnss_compat.so.2',
  'debian/aarch64/libxau6/libXau.so.6.0.0',
  'cuda/x86_64/libnvtoolsext1/libnvToolsExt.so.1.0.0',
  'cuda/aarch64/libnvtoolsext1/libnvToolsExt.so.1.0.0',
];

/** The compiled files the reader's mutation test starts from. */
export function mutationTargets(): Fixture[] {
  const compiled = fixtures()
    .filter((f) => f.origin === 'compiled')
    .sort((a, b) => a.id.localeCompare(b.id));
  return COMPILED_TARGETS.map(([description, predicate]) => {
    const found = compiled.find(predicate);
    if (found === undefined) throw new Error(`no compiled fixture is an ${description}`);
    return found;
  });
}

/** The files the read → plan → write fuzzer starts from: the compiled targets and real libraries. */
export function fuzzBases(): Fixture[] {
  return [...mutationTargets(), ...REAL_TARGETS.map((id) => fixture(id))];
}
