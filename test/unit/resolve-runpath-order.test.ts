// The order of the resolver's runpath (src/resolve/runpath-order.ts): the chosen copy of each library
// comes before any other copy of its name, the file's own entries keep their order and come before an
// added entry that holds another copy of one of their libraries, --runtime-dependencies stay first and
// --append-rpaths last, and a conflict is a value naming the library and both entries. No disk: each
// entry's directory is a table of names to files.

import { describe, expect, it } from 'vitest';
import type { ByteString } from '../../src/elf/byte-string.js';
import type { PlacedEntry } from '../../src/resolve/resolve-file.js';
import { type ChosenDependency, type DirectoryOracle, orderRunpath } from '../../src/resolve/runpath-order.js';
import { ascii } from '../helpers/byte-strings.js';

/** Entries and names are written here as ASCII text. */
const b = (text: string): ByteString => ascii<ByteString>(text);

/** Entry → library name → the file (an id; ids in one IDENTICAL group are byte-identical copies). */
type Disk = Readonly<Record<string, Readonly<Record<string, string>>>>;
const IDENTICAL: readonly (readonly string[])[] = [['zstd-copy-a', 'zstd-copy-b']];

/** `mayHold`: from the table ('listed'), or a yes to every question ('always': the shortcut off). */
function oracleOf(disk: Disk, mayHold: 'listed' | 'always' = 'listed'): DirectoryOracle<string> {
  return {
    holder: async (entry, name) => disk[entry]?.[name] ?? null,
    mayHold: (entry, name) => mayHold === 'always' || disk[entry]?.[name] !== undefined,
    same: async (a, b) => a === b || IDENTICAL.some((group) => group.includes(a) && group.includes(b)),
    libraryNames: async (entry) =>
      Object.keys(disk[entry] ?? {})
        .sort()
        .map(b),
  };
}

const own = (entry: string, ownIndex: number): PlacedEntry => ({ entry: b(entry), place: 'own', ownIndex });
const added = (entry: string): PlacedEntry => ({ entry: b(entry), place: 'added', ownIndex: null });
const first = (entry: string): PlacedEntry => ({ entry: b(entry), place: 'first', ownIndex: null });
const last = (entry: string): PlacedEntry => ({ entry: b(entry), place: 'last', ownIndex: null });
const chose = (name: string, entry: string | null, file: string): ChosenDependency<string> => ({
  name: b(name),
  entry: entry === null ? null : b(entry),
  file,
});

describe('the chosen copy comes first', () => {
  it('an added directory that holds another copy goes after the chosen one (the small repro: d1 ahead of t/lib)', async () => {
    const disk: Disk = { '/d1': { 'libzstd.so.1': 'zstd', 'libfoo.so.1': 'foo-d1' }, '/t/lib': { 'libfoo.so.1': 'foo-tree' } };
    const result = await orderRunpath(
      [added('/d1'), added('/t/lib')],
      [chose('libzstd.so.1', '/d1', 'zstd'), chose('libfoo.so.1', '/t/lib', 'foo-tree')],
      oracleOf(disk),
    );
    expect(result).toEqual({ kind: 'ordered', entries: ['/t/lib', '/d1'] });
  });

  it('the base order stands where nothing shadows', async () => {
    const disk: Disk = { '/a': { 'liba.so': 'a' }, '/b': { 'libb.so': 'b' }, $ORIGIN: { 'libsib.so': 's' } };
    const result = await orderRunpath(
      [added('/b'), added('/a'), own('$ORIGIN', 0)],
      [chose('liba.so', '/a', 'a'), chose('libb.so', '/b', 'b')],
      oracleOf(disk),
    );
    expect(result).toEqual({ kind: 'ordered', entries: ['/b', '/a', '$ORIGIN'] });
  });

  it('the same file, or a byte-identical copy, in an earlier entry is no other copy', async () => {
    const disk: Disk = { '/x': { 'libzstd.so.1': 'zstd-copy-a' }, '/y': { 'libzstd.so.1': 'zstd-copy-b' } };
    const result = await orderRunpath([added('/x'), added('/y')], [chose('libzstd.so.1', '/y', 'zstd-copy-b')], oracleOf(disk));
    expect(result).toEqual({ kind: 'ordered', entries: ['/x', '/y'] });
  });

  it("a library libc's directory provides: no entry may hold another copy of it", async () => {
    const disk: Disk = { '/usr/lib': { 'libc.so.6': 'debian-libc', 'libstdc++.so.6': 'stdcxx' } };
    const result = await orderRunpath(
      [added('/usr/lib')],
      [chose('libstdc++.so.6', '/usr/lib', 'stdcxx'), chose('libc.so.6', null, 'nix-glibc')],
      oracleOf(disk),
    );
    expect(result).toMatchObject({ kind: 'conflict', name: 'libc.so.6', wanted: null, other: '/usr/lib' });
    // The same libc through the added directory is no conflict.
    const same = await orderRunpath([added('/usr/lib')], [chose('libc.so.6', null, 'debian-libc')], oracleOf(disk));
    expect(same).toEqual({ kind: 'ordered', entries: ['/usr/lib'] });
  });
});

describe("the file's own entries", () => {
  it('keep their order, whatever order the dependencies put them in', async () => {
    const disk: Disk = { $ORIGIN: { 'libgraph.so.9': 'g' }, '$ORIGIN/../../cublas/lib': { 'libcublas.so.13': 'c' } };
    const result = await orderRunpath(
      [own('$ORIGIN/../../cublas/lib', 1), own('$ORIGIN', 0)],
      [chose('libcublas.so.13', '$ORIGIN/../../cublas/lib', 'c')],
      oracleOf(disk),
    );
    expect(result).toEqual({ kind: 'ordered', entries: ['$ORIGIN', '$ORIGIN/../../cublas/lib'] });
  });

  it('come before an added entry that holds another copy of one of their libraries (cuDNN and the host cuDNN)', async () => {
    const disk: Disk = {
      '/usr/lib/x86_64-linux-gnu': { 'libstdc++.so.6': 'stdcxx', 'libcudnn_graph.so.9': 'cudnn-9.14' },
      $ORIGIN: { 'libcudnn_graph.so.9': 'cudnn-9.19', 'libcudnn.so.9': 'cudnn-main' },
    };
    const result = await orderRunpath(
      [added('/usr/lib/x86_64-linux-gnu'), own('$ORIGIN', 0)],
      [chose('libstdc++.so.6', '/usr/lib/x86_64-linux-gnu', 'stdcxx')],
      oracleOf(disk),
    );
    expect(result).toEqual({ kind: 'ordered', entries: ['$ORIGIN', '/usr/lib/x86_64-linux-gnu'] });
  });

  it('an added entry stays ahead of an own one when they share no library', async () => {
    const disk: Disk = { '/zlib': { 'libz.so.1': 'z' }, $ORIGIN: { 'libsib.so': 's' } };
    const result = await orderRunpath([added('/zlib'), own('$ORIGIN', 0)], [chose('libz.so.1', '/zlib', 'z')], oracleOf(disk));
    expect(result).toEqual({ kind: 'ordered', entries: ['/zlib', '$ORIGIN'] });
  });
});

describe('what comes first and last stays there', () => {
  it('--runtime-dependencies first and --append-rpaths last, each in their order', async () => {
    const disk: Disk = { '/t/lib': { 'libfoo.so.1': 'foo' }, '/rt2': { 'libfoo.so.1': 'foo' } };
    const result = await orderRunpath(
      [first('/rt1'), first('/rt2'), added('/t/lib'), last('/ap1'), last('/ap2')],
      [chose('libfoo.so.1', '/t/lib', 'foo')],
      oracleOf(disk),
    );
    expect(result).toEqual({ kind: 'ordered', entries: ['/rt1', '/rt2', '/t/lib', '/ap1', '/ap2'] });
  });

  it('a runtime dependency that holds another copy of a chosen library is a conflict', async () => {
    const disk: Disk = { '/rt': { 'libfoo.so.1': 'foo-rt' }, '/t/lib': { 'libfoo.so.1': 'foo-tree' } };
    const result = await orderRunpath([first('/rt'), added('/t/lib')], [chose('libfoo.so.1', '/t/lib', 'foo-tree')], oracleOf(disk));
    expect(result).toMatchObject({ kind: 'conflict', name: 'libfoo.so.1', wanted: '/t/lib', other: '/rt' });
  });
});

describe('conflicts', () => {
  it('the chosen copy behind an own entry that holds another: the library and both entries, and why', async () => {
    const disk: Disk = { '$ORIGIN/a': { 'libx.so': 'x-a' }, '$ORIGIN/b': { 'libx.so': 'x-b' } };
    const result = await orderRunpath([own('$ORIGIN/a', 0), own('$ORIGIN/b', 1)], [chose('libx.so', '$ORIGIN/b', 'x-b')], oracleOf(disk));
    expect(result).toEqual({
      kind: 'conflict',
      name: 'libx.so',
      wanted: '$ORIGIN/b',
      other: '$ORIGIN/a',
      why: "the file's own entries keep their order",
    });
  });

  it('two chosen libraries each shadowed by the other directory', async () => {
    const disk: Disk = { '/p': { 'libp.so': 'p', 'libq.so': 'q-p' }, '/q': { 'libq.so': 'q', 'libp.so': 'p-q' } };
    const result = await orderRunpath(
      [added('/p'), added('/q')],
      [chose('libp.so', '/p', 'p'), chose('libq.so', '/q', 'q')],
      oracleOf(disk),
    );
    expect(result).toMatchObject({ kind: 'conflict', name: 'libp.so', wanted: '/p', other: '/q' });
    expect(result).toMatchObject({ why: 'the resolver chose libq.so from /q, and /p holds another' });
  });

  it('the same inputs give the same answer', async () => {
    const disk: Disk = { '/d1': { 'libfoo.so.1': 'foo-d1' }, '/t/lib': { 'libfoo.so.1': 'foo-tree' }, $ORIGIN: { 'libfoo.so.1': 'foo-o' } };
    const entries = [added('/d1'), own('$ORIGIN', 0), added('/t/lib')];
    const chosen = [chose('libfoo.so.1', '/t/lib', 'foo-tree')];
    const runs = await Promise.all([1, 2, 3].map(() => orderRunpath(entries, chosen, oracleOf(disk))));
    expect(new Set(runs.map((run) => JSON.stringify(run))).size).toBe(1);
    expect(runs[0]).toMatchObject({ kind: 'conflict', name: 'libfoo.so.1' });
  });
});

describe('mayHold is a shortcut only', () => {
  it('the same orders and conflicts when it says yes to everything', async () => {
    const cases: [Disk, PlacedEntry[], ChosenDependency<string>[]][] = [
      [
        { '/d1': { 'libzstd.so.1': 'zstd', 'libfoo.so.1': 'foo-d1' }, '/t/lib': { 'libfoo.so.1': 'foo-tree' } },
        [added('/d1'), added('/t/lib')],
        [chose('libzstd.so.1', '/d1', 'zstd'), chose('libfoo.so.1', '/t/lib', 'foo-tree')],
      ],
      [
        {
          $ORIGIN: { 'libcudnn_graph.so.9': 'graph-wheel', 'libcudnn.so.9': 'cudnn-wheel' },
          '/usr/lib': { 'libcudnn_graph.so.9': 'graph-host' },
        },
        [added('/usr/lib'), own('$ORIGIN', 0)],
        [],
      ],
      [
        { '/p': { 'libp.so': 'p', 'libq.so': 'q-p' }, '/q': { 'libq.so': 'q', 'libp.so': 'p-q' } },
        [added('/p'), added('/q')],
        [chose('libp.so', '/p', 'p'), chose('libq.so', '/q', 'q')],
      ],
    ];
    for (const [disk, entries, chosen] of cases) {
      const listed = await orderRunpath(entries, chosen, oracleOf(disk, 'listed'));
      expect(await orderRunpath(entries, chosen, oracleOf(disk, 'always'))).toEqual(listed);
    }
  });
});
