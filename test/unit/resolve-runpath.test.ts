// What the resolver writes into a file's runpath (docs/auto-patchelf.md, "What it writes"): the list
// R and its order, R empty, --nixpkgs-compat (R replaces the runpath, as `patchelf --set-rpath`), and
// the default semantics: each directory in the file's own spelling ($ORIGIN, ${ORIGIN}, another name
// of the same directory), --relative-to-tree, and the file's other $ORIGIN entries kept. No disk: the
// paths that exist and the symbolic links are given.

import { describe, expect, it } from 'vitest';
import { type FileResolution, resolveFile, type ResolverFileFacts, type ResolverOptions } from '../../src/resolve/resolve-file.js';
import { type AsText, ascii } from '../helpers/byte-strings.js';
import { type FakeDisk, fakeFileSystem, type IndexRow, indexOf, SYSV, X86_64, ZLIB } from './helpers/resolver-inputs.js';

/** The file's facts and the options, as the cases write them (ASCII text). */
type Facts = AsText<Partial<ResolverFileFacts>>;
type Options = AsText<Partial<ResolverOptions>>;

const BZIP2 = '/nix/store/bbbb-bzip2/lib';
const GLIBC = '/nix/store/cccc-glibc/lib';
const APPEND = '/nix/store/dddd-extra/lib';

/** The tree /out: a program in bin/ and its libraries in lib/ and lib/plugins/. */
const OUT_DISK: FakeDisk = { paths: ['/out/bin', '/out/lib', '/out/lib/plugins', ZLIB, BZIP2, GLIBC] };
const INDEX: readonly IndexRow[] = [
  ['libout.so', X86_64, '/out/lib', SYSV],
  ['libplugin.so', X86_64, '/out/lib/plugins', SYSV],
  ['libz.so.1', X86_64, ZLIB, SYSV],
  ['libbz2.so.1', X86_64, BZIP2, SYSV],
];

/** The entries of the runpath the resolver writes, in its base order; null when it leaves the runpath alone. */
const entriesOf = (resolution: FileResolution): string[] | null => resolution.runpath?.map((placed) => placed.entry) ?? null;

function resolve(facts: Facts, options: Options = {}, disk: FakeDisk = OUT_DISK): FileResolution {
  return resolveFile(fileFacts(facts), indexOf(INDEX), resolverOptions(options), fakeFileSystem(disk));
}

/** An x86_64 SYSV program in /out/bin with no dependencies and no runpath, unless `facts` says otherwise. */
function fileFacts(facts: Facts): ResolverFileFacts {
  return ascii<ResolverFileFacts>({
    directory: '/out/bin',
    machine: X86_64,
    osAbi: SYSV,
    hasInterpreter: true,
    needed: [],
    dlopen: [],
    runpath: [],
    ...facts,
  });
}

/** Default semantics with the driver hook on, nothing else, unless `options` says otherwise. */
function resolverOptions(options: Options): ResolverOptions {
  return ascii<ResolverOptions>({
    semantics: { kind: 'default', driverHooks: { driver: true, cudaCompat: false }, relativeToTrees: [] },
    keepLibc: false,
    runtimeDependencies: [],
    appendRunpaths: [],
    ...options,
  });
}

const DEFAULT_RELATIVE: Options = {
  semantics: { kind: 'default', driverHooks: { driver: true, cudaCompat: false }, relativeToTrees: ['/out'] },
};
const COMPAT: Options = { semantics: { kind: 'nixpkgs-compat' } };

describe('the list R', () => {
  it('--runtime-dependencies (files with an interpreter), then each dependency in DT_NEEDED-then-dlopen order, then --append-rpaths', () => {
    const resolution = resolve(
      { needed: ['libz.so.1', 'libout.so', 'libz.so.1'], dlopen: [['libbz2.so.1'], ['libout.so']] },
      { runtimeDependencies: [GLIBC, ZLIB], appendRunpaths: [APPEND, BZIP2] },
    );
    expect(resolution.resolved.map(({ directory, names }) => [directory, names])).toEqual([
      [GLIBC, []],
      // A runtime dependency that also resolves a name: one entry, first place, with the name.
      [ZLIB, ['libz.so.1']],
      ['/out/lib', ['libout.so']],
      [BZIP2, ['libbz2.so.1']],
      [APPEND, []],
    ]);
    expect(entriesOf(resolution)).toEqual([GLIBC, ZLIB, '/out/lib', BZIP2, APPEND]);
  });

  it('--runtime-dependencies are for files with an interpreter only; --append-rpaths for every file', () => {
    const resolution = resolve(
      { hasInterpreter: false, needed: ['libz.so.1'] },
      { runtimeDependencies: [GLIBC], appendRunpaths: [APPEND] },
    );
    expect(entriesOf(resolution)).toEqual([ZLIB, APPEND]);
  });

  it('R empty: the runpath is left as it is, whatever it holds', () => {
    for (const runpath of [[], ['/usr/lib', '$ORIGIN', 'relative']]) {
      const resolution = resolve({ needed: ['libmissing.so', 'libcuda.so.1'], runpath });
      expect(resolution).toMatchObject({ resolved: [], kept: [], runpath: null, missing: [['libmissing.so']] });
    }
    // A runtime dependency alone makes R non-empty.
    expect(entriesOf(resolve({ runpath: ['/usr/lib'] }, { runtimeDependencies: [GLIBC] }))).toEqual([GLIBC]);
  });

  it('a missing dependency still leaves what resolved to be written', () => {
    const resolution = resolve({ needed: ['libz.so.1', 'libmissing.so'] });
    expect(entriesOf(resolution)).toEqual([ZLIB]);
    expect(resolution.missing).toEqual([['libmissing.so']]);
  });
});

describe('--nixpkgs-compat: R replaces the runpath', () => {
  it('exactly R: no respelling, no $ORIGIN kept, no driver library rule', () => {
    const resolution = resolve(
      { needed: ['libout.so', 'libz.so.1', 'libcuda.so.1'], runpath: ['$ORIGIN/../lib', '$ORIGIN/../lib/plugins', '/usr/lib'] },
      { ...COMPAT, runtimeDependencies: [GLIBC] },
    );
    expect(entriesOf(resolution)).toEqual([GLIBC, '/out/lib', ZLIB]);
    expect(resolution.resolved.map((entry) => entry.entry)).toEqual([GLIBC, '/out/lib', ZLIB]);
    expect(resolution.kept).toEqual([]);
    expect(resolution.missing).toEqual([['libcuda.so.1']]);
  });
});

interface SpellingCase {
  readonly name: string;
  readonly file?: Facts;
  readonly options?: Options;
  readonly disk?: FakeDisk;
  /** The entry written for each directory of R, then the kept ones, then the runpath. */
  readonly spellings: readonly string[];
  readonly kept: readonly string[];
  readonly runpath: readonly string[];
}

const SPELLING_CASES: readonly SpellingCase[] = [
  {
    name: 'a directory the file names with $ORIGIN keeps that spelling',
    file: { needed: ['libout.so', 'libz.so.1'], runpath: ['$ORIGIN/../lib', '/old/zlib/lib'] },
    spellings: ['$ORIGIN/../lib', ZLIB],
    kept: [],
    runpath: ['$ORIGIN/../lib', ZLIB],
  },
  {
    name: '${ORIGIN} too, in any spelling of the path',
    file: { needed: ['libout.so'], runpath: ['${ORIGIN}/../lib/'] },
    spellings: ['${ORIGIN}/../lib/'],
    kept: [],
    runpath: ['${ORIGIN}/../lib/'],
  },
  {
    name: 'a library beside the file: $ORIGIN alone',
    file: { directory: '/out/lib', hasInterpreter: false, needed: ['libout.so'], runpath: ['$ORIGIN'] },
    spellings: ['$ORIGIN'],
    kept: [],
    runpath: ['$ORIGIN'],
  },
  {
    name: 'real paths compared: an absolute entry naming the same directory through a link keeps its spelling',
    file: { needed: ['libz.so.1'], runpath: ['/nix/store/zzzz-zlib-link/lib'] },
    disk: { ...OUT_DISK, links: { '/nix/store/zzzz-zlib-link/lib': ZLIB } },
    spellings: ['/nix/store/zzzz-zlib-link/lib'],
    kept: [],
    runpath: ['/nix/store/zzzz-zlib-link/lib'],
  },
  {
    name: "real paths compared: $ORIGIN expanded from the file's directory, which may be a link",
    file: { directory: '/out/libexec', needed: ['libz.so.1'], runpath: ['$ORIGIN/zlib'] },
    disk: { ...OUT_DISK, links: { '/out/libexec/zlib': ZLIB } },
    spellings: ['$ORIGIN/zlib'],
    kept: [],
    runpath: ['$ORIGIN/zlib'],
  },
  {
    name: 'the other $ORIGIN entries are kept after R, in their order; absolute and relative ones go',
    file: {
      needed: ['libz.so.1'],
      runpath: ['/usr/lib', '$ORIGIN/../lib/plugins', 'relative/lib', '${ORIGIN}/../share', '', '$ORIGIN/../$LIB', '/opt/$LIB'],
    },
    spellings: [ZLIB],
    kept: ['$ORIGIN/../lib/plugins', '${ORIGIN}/../share', '$ORIGIN/../$LIB'],
    runpath: [ZLIB, '$ORIGIN/../lib/plugins', '${ORIGIN}/../share', '$ORIGIN/../$LIB'],
  },
  {
    name: 'an entry is kept once per directory: a second spelling of a written or kept directory goes',
    file: {
      needed: ['libout.so'],
      runpath: ['$ORIGIN/../lib', '${ORIGIN}/../lib', '$ORIGIN/../share', '$ORIGIN/../bin/../share'],
    },
    spellings: ['$ORIGIN/../lib'],
    kept: ['$ORIGIN/../share'],
    runpath: ['$ORIGIN/../lib', '$ORIGIN/../share'],
  },
  {
    name: '$ORIGINAL is not $ORIGIN: not kept',
    file: { needed: ['libz.so.1'], runpath: ['$ORIGINAL/lib', '$ORIGIN_X', '$ORIGIN/x'] },
    spellings: [ZLIB],
    kept: ['$ORIGIN/x'],
    runpath: [ZLIB, '$ORIGIN/x'],
  },
  {
    name: '--relative-to-tree: a directory of the same tree as the file becomes $ORIGIN/…',
    file: { needed: ['libout.so', 'libplugin.so', 'libz.so.1'] },
    options: DEFAULT_RELATIVE,
    spellings: ['$ORIGIN/../lib', '$ORIGIN/../lib/plugins', ZLIB],
    kept: [],
    runpath: ['$ORIGIN/../lib', '$ORIGIN/../lib/plugins', ZLIB],
  },
  {
    name: "--relative-to-tree: the file's own directory is $ORIGIN",
    file: { directory: '/out/lib', needed: ['libout.so'] },
    options: DEFAULT_RELATIVE,
    spellings: ['$ORIGIN'],
    kept: [],
    runpath: ['$ORIGIN'],
  },
  {
    name: "--relative-to-tree: another tree's directory stays absolute (outputs are installed apart)",
    file: { directory: '/lib-output/lib', needed: ['libout.so'] },
    options: { semantics: { kind: 'default', driverHooks: { driver: true, cudaCompat: false }, relativeToTrees: ['/out', '/lib-output'] } },
    spellings: ['/out/lib'],
    kept: [],
    runpath: ['/out/lib'],
  },
  {
    name: "--relative-to-tree: the file's own spelling comes first",
    file: { needed: ['libout.so'], runpath: ['/out/lib/'] },
    options: DEFAULT_RELATIVE,
    spellings: ['/out/lib/'],
    kept: [],
    runpath: ['/out/lib/'],
  },
  {
    name: 'without --relative-to-tree: absolute',
    file: { needed: ['libout.so'] },
    spellings: ['/out/lib'],
    kept: [],
    runpath: ['/out/lib'],
  },
];

describe('default semantics: the spelling of each entry, and the kept ones', () => {
  it.each(SPELLING_CASES)('$name', (spelling) => {
    const resolution = resolve(spelling.file ?? {}, spelling.options, spelling.disk);
    expect(resolution.resolved.map((entry) => entry.entry)).toEqual(spelling.spellings);
    expect(resolution.kept).toEqual(spelling.kept);
    expect(entriesOf(resolution)).toEqual(spelling.runpath);
  });

  it('two directories of R that are one directory are written once', () => {
    const disk: FakeDisk = { ...OUT_DISK, links: { '/nix/store/eeee-zlib-alias/lib': ZLIB } };
    const resolution = resolve(
      { needed: ['libz.so.1'], runpath: ['$ORIGIN/../lib'] },
      { appendRunpaths: ['/nix/store/eeee-zlib-alias/lib'] },
      disk,
    );
    expect(resolution.resolved.map((entry) => [entry.directory, entry.entry])).toEqual([
      [ZLIB, ZLIB],
      ['/nix/store/eeee-zlib-alias/lib', ZLIB],
    ]);
    expect(entriesOf(resolution)).toEqual([ZLIB, '$ORIGIN/../lib']);
  });

  it('is a function of its inputs: the same file, index and options give the same resolution', () => {
    const file: Facts = {
      needed: ['libz.so.1', 'libout.so'],
      dlopen: [['libbz2.so.1']],
      runpath: ['$ORIGIN/../lib/plugins'],
    };
    expect(resolve(file, DEFAULT_RELATIVE)).toEqual(resolve(file, DEFAULT_RELATIVE));
  });
});
