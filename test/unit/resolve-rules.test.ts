// How the resolver finds each dependency of a file (docs/auto-patchelf.md, "How a dependency
// resolves"): the five rules in their order, alternatives, machines and OS ABIs, and the index's
// order (the first compatible library wins, the next one is reported). No disk: the index, the libc
// directory and the files that exist are given.

import { describe, expect, it } from 'vitest';
import type { ByteString } from '../../src/elf/byte-string.js';
import { libcAlwaysKept, osAbisCompatible, targetSkipReason } from '../../src/resolve/os-abi.js';
import type { DriverLibraryHooks } from '../../src/resolve/driver-libraries.js';
import { type DependencyFacts, type DependencyOutcome, resolveDependencies } from '../../src/resolve/resolve-dependencies.js';
import { type AsText, ascii } from '../helpers/byte-strings.js';
import {
  AARCH64,
  type FakeDisk,
  FREEBSD,
  fakeFileSystem,
  GNU,
  type IndexRow,
  indexOf,
  SYSV,
  X86_64,
  ZLIB,
} from './helpers/resolver-inputs.js';

const OTHER_ZLIB = '/nix/store/bbbb-zlib-ng-compat/lib';
const STUBS = '/nix/store/cccc-cuda_cudart/lib/stubs';
const GLIBC = ['libc.so.6', 'libm.so.6', 'libdl.so.2'];

/** One line per dependency: `alternatives -> how`, the way a person reads a plan. */
function describeOutcome({ alternatives, found }: DependencyOutcome): string {
  const dependency = alternatives.join('|');
  if (found === null) return `${dependency} -> missing`;
  const { by } = found;
  const how =
    by.rule === 'index'
      ? `index ${by.directory}${by.shadowed === null ? '' : ` (also ${by.shadowed})`}`
      : by.rule === 'driver-library'
        ? `driver-library (${by.hook})`
        : by.rule;
  return `${dependency} -> ${found.name}: ${how}`;
}

interface RuleCase {
  readonly name: string;
  readonly needed?: readonly string[];
  readonly dlopen?: readonly (readonly string[])[];
  readonly osAbi?: number;
  readonly machine?: number;
  readonly index?: readonly IndexRow[];
  readonly disk?: FakeDisk;
  readonly keepLibc?: boolean;
  /** Directories the file's own $ORIGIN entries name, in their order. */
  readonly ownDirectories?: readonly string[];
  /** The hooks on for rule 3 (default: the driver hook alone); null: the rule is off (--nixpkgs-compat). */
  readonly driverHooks?: DriverLibraryHooks | null;
  readonly outcomes: readonly string[];
}

/** An x86_64 SYSV file with these dependencies, unless `facts` says otherwise. */
/** Names are written here as ASCII text. */
const b = (text: string): ByteString => ascii<ByteString>(text);
const fileOf = (facts: AsText<Partial<DependencyFacts>>): DependencyFacts =>
  ascii<DependencyFacts>({ machine: X86_64, osAbi: SYSV, needed: [], dlopen: [], ...facts });

function outcomesOf(file: DependencyFacts, rows: readonly IndexRow[], rule: Omit<RuleCase, 'name' | 'outcomes'> = {}): string[] {
  const fileSystem = fakeFileSystem(rule.disk);
  return resolveDependencies(file, {
    index: indexOf(rows),
    keepLibc: rule.keepLibc ?? false,
    driverHooks: rule.driverHooks === undefined ? { driver: true, cudaCompat: false } : rule.driverHooks,
    inLibcDir: fileSystem.inLibcDir,
    libcOwns: fileSystem.libcOwns,
    isFile: fileSystem.isFile,
    ownRank: (directory) => {
      const rank = rule.ownDirectories?.indexOf(directory) ?? -1;
      return rank < 0 ? null : rank;
    },
  }).map(describeOutcome);
}

const RULE_CASES: readonly RuleCase[] = [
  // Rule 1.
  {
    name: 'an absolute path that exists is found, and adds nothing',
    needed: ['/opt/vendor/lib/libvendor.so'],
    disk: { paths: ['/opt/vendor/lib/libvendor.so'] },
    outcomes: ['/opt/vendor/lib/libvendor.so -> /opt/vendor/lib/libvendor.so: absolute-path'],
  },
  {
    name: 'an absolute path that does not exist is looked up in the index by its file name, as the anchor does',
    needed: ['/gone/libz.so.1', '/gone/libnothing.so'],
    index: [['libz.so.1', X86_64, ZLIB, SYSV]],
    outcomes: [`/gone/libz.so.1 -> /gone/libz.so.1: index ${ZLIB}`, '/gone/libnothing.so -> missing'],
  },
  // Rules 2 and 5.
  {
    name: 'a name in the libc directory is found there and adds nothing, before the index is asked',
    needed: ['libc.so.6', 'libm.so.6'],
    index: [['libm.so.6', X86_64, '/elsewhere/lib', SYSV]],
    disk: { libc: GLIBC },
    outcomes: ['libc.so.6 -> libc.so.6: libc', 'libm.so.6 -> libm.so.6: libc'],
  },
  {
    name: '--keep-libc: the index first (its directory is added), then the libc directory',
    needed: ['libc.so.6', 'libm.so.6'],
    index: [['libm.so.6', X86_64, '/glibc/lib', SYSV]],
    disk: { libc: GLIBC },
    keepLibc: true,
    outcomes: ['libc.so.6 -> libc.so.6: kept-libc', 'libm.so.6 -> libm.so.6: index /glibc/lib'],
  },
  {
    name: "a libc directory that holds more than glibc (Debian's): the tree's own copy of another library wins, the system's is last",
    needed: ['libc.so.6', 'liblzma.so.5', 'libstdc++.so.6'],
    index: [['liblzma.so.5', X86_64, '/out/lib', SYSV]],
    disk: { libc: ['libc.so.6', 'liblzma.so.5', 'libstdc++.so.6'], libcOwns: ['libc.so.6'] },
    outcomes: [
      'libc.so.6 -> libc.so.6: libc',
      'liblzma.so.5 -> liblzma.so.5: index /out/lib',
      'libstdc++.so.6 -> libstdc++.so.6: kept-libc',
    ],
  },
  {
    name: "a copy in a directory the file's own $ORIGIN entries name wins over the first in walk order: its runpath finds it first",
    needed: ['libq.so', 'libz.so.1'],
    index: [
      ['libq.so', X86_64, '/out/x', SYSV],
      ['libq.so', X86_64, '/out/y', SYSV],
      ['libq.so', X86_64, '/out/z', SYSV],
      ['libz.so.1', X86_64, ZLIB, SYSV],
    ],
    ownDirectories: ['/out/z', '/out/y'],
    outcomes: ['libq.so -> libq.so: index /out/z (also /out/y)', `libz.so.1 -> libz.so.1: index ${ZLIB}`],
  },
  {
    name: 'FreeBSD and OpenBSD files always keep libc (their ld.so and libc are packaged apart)',
    needed: ['libc.so.7'],
    osAbi: FREEBSD,
    index: [['libc.so.7', X86_64, '/freebsd/lib', FREEBSD]],
    disk: { libc: ['libc.so.7'] },
    outcomes: ['libc.so.7 -> libc.so.7: index /freebsd/lib'],
  },
  {
    name: 'without a libc directory (no --interpreter), libc resolves through the index like any library',
    needed: ['libc.so.6'],
    index: [['libc.so.6', X86_64, '/glibc/lib', SYSV]],
    outcomes: ['libc.so.6 -> libc.so.6: index /glibc/lib'],
  },
  // Rule 3.
  {
    name: "a driver library is the driver hook's, even where the index has one (the link-time stub)",
    needed: ['libcuda.so.1', 'libnvidia-ml.so.1'],
    index: [['libcuda.so.1', X86_64, STUBS, SYSV]],
    outcomes: ['libcuda.so.1 -> libcuda.so.1: driver-library (driver)', 'libnvidia-ml.so.1 -> libnvidia-ml.so.1: driver-library (driver)'],
  },
  {
    name: "with cuda-compat on, what cuda_compat holds is its, the rest the driver hook's",
    needed: ['libcuda.so.1', 'libnvidia-ptxjitcompiler.so.1', 'libnvidia-ml.so.1'],
    driverHooks: { driver: true, cudaCompat: true },
    outcomes: [
      'libcuda.so.1 -> libcuda.so.1: driver-library (cuda-compat)',
      'libnvidia-ptxjitcompiler.so.1 -> libnvidia-ptxjitcompiler.so.1: driver-library (cuda-compat)',
      'libnvidia-ml.so.1 -> libnvidia-ml.so.1: driver-library (driver)',
    ],
  },
  {
    name: 'cuda-compat without the driver hook: only what cuda_compat holds',
    needed: ['libcuda.so.1', 'libnvidia-ml.so.1'],
    driverHooks: { driver: false, cudaCompat: true },
    outcomes: ['libcuda.so.1 -> libcuda.so.1: driver-library (cuda-compat)', 'libnvidia-ml.so.1 -> missing'],
  },
  {
    name: 'both hooks off: no driver library rule, the index decides',
    needed: ['libcuda.so.1', 'libnvidia-ml.so.1'],
    index: [['libcuda.so.1', X86_64, STUBS, SYSV]],
    driverHooks: { driver: false, cudaCompat: false },
    outcomes: [`libcuda.so.1 -> libcuda.so.1: index ${STUBS}`, 'libnvidia-ml.so.1 -> missing'],
  },
  {
    name: '--nixpkgs-compat: no driver library rule (the anchor has none)',
    needed: ['libcuda.so.1', 'libnvidia-ml.so.1'],
    index: [['libcuda.so.1', X86_64, STUBS, SYSV]],
    driverHooks: null,
    outcomes: [`libcuda.so.1 -> libcuda.so.1: index ${STUBS}`, 'libnvidia-ml.so.1 -> missing'],
  },
  {
    name: "Jetson: the L4T driver libraries are the driver hook's",
    needed: ['libnvrm_gpu.so', 'libnvrm_mem.so', 'libnvos.so'],
    machine: AARCH64,
    outcomes: [
      'libnvrm_gpu.so -> libnvrm_gpu.so: driver-library (driver)',
      'libnvrm_mem.so -> libnvrm_mem.so: driver-library (driver)',
      'libnvos.so -> libnvos.so: driver-library (driver)',
    ],
  },
  // Rule 4: machines and OS ABIs.
  {
    name: "the index: the file's machine only",
    needed: ['libz.so.1'],
    machine: AARCH64,
    index: [
      ['libz.so.1', X86_64, ZLIB, SYSV],
      ['libz.so.1', AARCH64, '/aarch64/zlib/lib', SYSV],
    ],
    outcomes: ['libz.so.1 -> libz.so.1: index /aarch64/zlib/lib'],
  },
  {
    name: 'the index: an incompatible OS ABI is passed over for the next library',
    needed: ['libz.so.1'],
    osAbi: GNU,
    index: [
      ['libz.so.1', X86_64, '/freebsd/lib', FREEBSD],
      ['libz.so.1', X86_64, ZLIB, SYSV],
    ],
    outcomes: [`libz.so.1 -> libz.so.1: index ${ZLIB}`],
  },
  {
    name: 'the index: a SYSV file can use a library of any OS ABI',
    needed: ['libz.so.1'],
    index: [['libz.so.1', X86_64, '/gnu/lib', GNU]],
    outcomes: ['libz.so.1 -> libz.so.1: index /gnu/lib'],
  },
  {
    name: 'the index knows libraries by file name: a name with a directory is looked up by its last part',
    needed: ['sub/libq.so'],
    index: [['libq.so', X86_64, '/q/lib', SYSV]],
    outcomes: ['sub/libq.so -> sub/libq.so: index /q/lib'],
  },
  // Alternatives (.note.dlopen).
  {
    name: 'alternatives: the first one that any rule finds, each tried through all the rules',
    dlopen: [
      ['libbpf.so.1', 'libbpf.so.0'],
      ['libz.so.1', 'libc.so.6'],
    ],
    index: [
      ['libbpf.so.0', X86_64, '/bpf0/lib', SYSV],
      ['libz.so.1', X86_64, ZLIB, SYSV],
    ],
    disk: { libc: GLIBC },
    outcomes: ['libbpf.so.1|libbpf.so.0 -> libbpf.so.0: index /bpf0/lib', `libz.so.1|libc.so.6 -> libz.so.1: index ${ZLIB}`],
  },
  {
    name: 'alternatives: missing when none resolves, with all of them',
    needed: ['libz.so.1'],
    dlopen: [['libzstd.so.1', 'libzstd.so.0']],
    index: [['libz.so.1', X86_64, ZLIB, SYSV]],
    outcomes: [`libz.so.1 -> libz.so.1: index ${ZLIB}`, 'libzstd.so.1|libzstd.so.0 -> missing'],
  },
];

describe('how a dependency resolves', () => {
  it.each(RULE_CASES)('$name', (rule) => {
    const file = fileOf({
      needed: rule.needed ?? [],
      dlopen: rule.dlopen ?? [],
      osAbi: rule.osAbi ?? SYSV,
      machine: rule.machine ?? X86_64,
    });
    expect(outcomesOf(file, rule.index ?? [], rule)).toEqual(rule.outcomes);
  });

  it('asks the disk only what each rule needs, in rule order', () => {
    const asked: string[] = [];
    const outcomes = resolveDependencies(fileOf({ needed: ['/abs/libx.so', 'libc.so.6', 'libcuda.so.1', 'libz.so.1'] }), {
      index: indexOf([['libz.so.1', X86_64, ZLIB, SYSV]]),
      keepLibc: false,
      driverHooks: { driver: true, cudaCompat: false },
      inLibcDir: (name) => {
        asked.push(`libc ${name}`);
        return name === 'libc.so.6';
      },
      libcOwns: () => true,
      ownRank: () => null,
      isFile: (path) => {
        asked.push(`file ${path}`);
        return true;
      },
    });
    expect(outcomes.map((outcome) => outcome.found?.by.rule)).toEqual(['absolute-path', 'libc', 'driver-library', 'index']);
    // An absolute path is never a libc name; a name without '/' is never checked as a file.
    expect(asked).toEqual(['file /abs/libx.so', 'libc libc.so.6', 'libc libcuda.so.1', 'libc libz.so.1']);
  });
});

describe('OS ABIs and the target', () => {
  it.each([
    [SYSV, SYSV, true],
    [SYSV, GNU, true],
    [GNU, SYSV, true],
    [GNU, GNU, true],
    [GNU, FREEBSD, false],
    [FREEBSD, 12, false],
    // A value no table names is compared as a number, as pyelftools leaves it.
    [200, 200, true],
    [200, GNU, false],
    [200, SYSV, true],
  ])('OS ABIs %i and %i go together: %s', (a, b, compatible) => {
    expect(osAbisCompatible(a, b)).toBe(compatible);
    expect(osAbisCompatible(b, a)).toBe(compatible);
  });

  it('forces --keep-libc for FreeBSD (9) and OpenBSD (12) only', () => {
    expect([0, 3, 9, 12, 2, 6].map(libcAlwaysKept)).toEqual([false, false, true, true, false, false]);
  });

  it("skips a file of another machine or an incompatible OS ABI than the interpreter's, and none without one", () => {
    const target = { machine: X86_64, osAbi: SYSV };
    expect(targetSkipReason({ machine: X86_64, osAbi: GNU }, target)).toBeNull();
    expect(targetSkipReason({ machine: AARCH64, osAbi: SYSV }, target)).toBe('other-machine');
    expect(targetSkipReason({ machine: X86_64, osAbi: FREEBSD }, { machine: X86_64, osAbi: GNU })).toBe('incompatible-os-abi');
    expect(targetSkipReason({ machine: AARCH64, osAbi: FREEBSD }, null)).toBeNull();
  });
});

describe('the index: order, duplicates, determinism', () => {
  it('keeps walk order per (name, machine), one entry per directory', () => {
    const index = indexOf([
      ['libz.so.1', X86_64, ZLIB, SYSV],
      ['libz.so.1', AARCH64, '/arm/lib', SYSV],
      ['libz.so.1', X86_64, OTHER_ZLIB, GNU],
      ['libz.so.1', X86_64, ZLIB, SYSV],
    ]);
    expect(index.entries(b('libz.so.1'), X86_64)).toEqual([
      { directory: ZLIB, osAbi: SYSV },
      { directory: OTHER_ZLIB, osAbi: GNU },
    ]);
    expect(index.entries(b('libz.so.1'), AARCH64)).toEqual([{ directory: '/arm/lib', osAbi: SYSV }]);
    expect(index.entries(b('libz.so'), X86_64)).toEqual([]);
  });

  it('the first compatible library wins, and a later compatible one in another directory is reported', () => {
    const rows: IndexRow[] = [
      ['libz.so.1', X86_64, ZLIB, SYSV],
      ['libz.so.1', X86_64, OTHER_ZLIB, SYSV],
    ];
    expect(indexOf(rows).lookup(b('libz.so.1'), X86_64, SYSV)).toEqual({
      library: { directory: ZLIB, osAbi: SYSV },
      shadowed: { directory: OTHER_ZLIB, osAbi: SYSV },
    });
    // The walk's order decides, nothing else (the walk sorts each directory's names by byte value).
    expect(indexOf([...rows].reverse()).lookup(b('libz.so.1'), X86_64, SYSV)?.library.directory).toBe(OTHER_ZLIB);
    const resolve = (): string[] => outcomesOf(fileOf({ needed: ['libz.so.1'] }), rows);
    expect(resolve()).toEqual([`libz.so.1 -> libz.so.1: index ${ZLIB} (also ${OTHER_ZLIB})`]);
    expect(resolve()).toEqual(resolve());
  });

  it('a later library this file could not use is no duplicate', () => {
    const index = indexOf([
      ['libz.so.1', X86_64, ZLIB, GNU],
      ['libz.so.1', X86_64, '/freebsd/lib', FREEBSD],
    ]);
    expect(index.lookup(b('libz.so.1'), X86_64, GNU)).toEqual({ library: { directory: ZLIB, osAbi: GNU }, shadowed: null });
    // A SYSV file could use either: the second is reported.
    expect(index.lookup(b('libz.so.1'), X86_64, SYSV)?.shadowed).toEqual({ directory: '/freebsd/lib', osAbi: FREEBSD });
    expect(index.lookup(b('libz.so.1'), X86_64, 12)).toBeNull();
  });
});
