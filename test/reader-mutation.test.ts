// Seeded random mutation of real files: whatever the bytes, the reader either reads the file or throws a
// CudaPatchelfError that says where — never another exception, never a long stall.
//
// Replay: FUZZ_SEED=<hex seed> npx vitest run test/reader-mutation.test.ts (the seed is in every failure);
// FUZZ_MUTATIONS=<n per file> for a longer run.

import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { readElfImage } from '../src/elf/elf-image.js';
import { readSectionHeaders } from '../src/elf/section-headers.js';
import { summarize } from '../src/elf/summary.js';
import { CudaPatchelfError } from '../src/errors/cuda-patchelf-error.js';
import { fixtures, type Fixture } from './helpers/fixtures.js';
import { fieldOffsets, rawLayout, writeUnsigned, type RawLayout } from './helpers/malformed.js';
import { MemoryByteSource } from './helpers/memory-byte-source.js';
import { Watchdog } from './helpers/watchdog.js';

const SEED = Number.parseInt(process.env.FUZZ_SEED ?? '0x5eed1e5', 16) >>> 0;
/** FUZZ_MUTATIONS raises the count for a longer hunt; the default keeps the run to a few seconds. */
const MUTATIONS_PER_FILE = Number.parseInt(process.env.FUZZ_MUTATIONS ?? '2000', 10);
const MIN_MUTATIONS = 10_000;
/**
 * One read takes well under a millisecond; single reads of a few hundred ms happen when the collector
 * runs. A loop driven by a bad count or offset would run far past this bound.
 */
const PER_CALL_MS = 5_000;

/** mulberry32: small, fast and the same on every platform, so a seed replays exactly. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Rng {
  below(n: number): number;
  pick<T>(items: readonly T[]): T;
}

function rng(seed: number): Rng {
  const next = mulberry32(seed);
  return {
    below: (n) => Math.floor(next() * n),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T,
  };
}

interface Region {
  readonly name: string;
  readonly start: number;
  readonly end: number;
}

function regionsOf(layout: RawLayout, size: number): Region[] {
  const regions: Region[] = [
    { name: 'ELF header', start: 0, end: layout.headerSize },
    { name: 'program header table', start: layout.phoff, end: layout.phoff + layout.phnum * layout.phentsize },
  ];
  if (layout.dynamic !== null) regions.push({ name: 'dynamic array', start: layout.dynamic.offset, end: layout.dynamic.offset + layout.dynamic.filesz });
  if (layout.dynstr !== null) regions.push({ name: '.dynstr', start: layout.dynstr.offset, end: layout.dynstr.offset + layout.dynstr.size });
  if (layout.interp !== null) regions.push({ name: 'PT_INTERP', start: layout.interp.offset, end: layout.interp.offset + layout.interp.filesz });
  if (layout.shoff !== 0) regions.push({ name: 'section header table', start: layout.shoff, end: Math.min(size, layout.shoff + 64 * 40) });
  return regions.filter((r) => r.start < r.end && r.end <= size);
}

const boundaryValues = (size: number): bigint[] => [
  0n,
  1n,
  0x7fn,
  0x80n,
  0xffn,
  0x7fffn,
  0xffffn,
  0x10000n,
  0x7fffffffn,
  0x80000000n,
  0xffffffffn,
  0x100000000n,
  2n ** 53n - 1n,
  2n ** 53n + 1n,
  2n ** 63n,
  2n ** 64n - 1n,
  BigInt(size - 1),
  BigInt(size),
  BigInt(size + 1),
];

/** Tags whose values the reader follows, and the markers around them. */
const INTERESTING_TAGS = [0n, 1n, 5n, 10n, 14n, 15n, 29n, 30n, 0x6ffffffbn, 0x7fffffffn, 2n ** 63n, 2n ** 64n - 1n];

/** Applies one to three mutations to a copy of `base`; returns the bytes and what was done. */
function mutate(base: Uint8Array, layout: RawLayout, r: Rng): { bytes: Uint8Array; what: string[] } {
  let bytes = base.slice();
  const what: string[] = [];
  const f = fieldOffsets(layout.elfClass);
  const w = f.word as 4 | 8;
  const le = layout.little;
  const regions = regionsOf(layout, base.length);
  const values = boundaryValues(base.length);
  const put = (at: number, width: 2 | 4 | 8, value: bigint, label: string): void => {
    if (at < 0 || at + width > bytes.length) return;
    writeUnsigned(bytes, at, width, le, value);
    what.push(`${label}@0x${at.toString(16)}=0x${value.toString(16)}`);
  };
  const count = 1 + r.below(3);
  for (let i = 0; i < count; i++) {
    const op = r.below(8);
    const region = r.pick(regions);
    switch (op) {
      case 0: {
        const at = region.start + r.below(region.end - region.start);
        const value = r.below(256);
        bytes[at] = value;
        what.push(`byte ${region.name}@0x${at.toString(16)}=0x${value.toString(16)}`);
        break;
      }
      case 1: {
        const at = region.start + r.below(region.end - region.start);
        const bit = r.below(8);
        bytes[at] = (bytes[at] ?? 0) ^ (1 << bit);
        what.push(`flip ${region.name}@0x${at.toString(16)} bit ${bit}`);
        break;
      }
      case 2: {
        const width = r.pick([2, 4, w] as const);
        const at = region.start + Math.floor(r.below(region.end - region.start) / width) * width;
        put(at, width, BigInt.asUintN(width * 8, r.pick(values)), `word ${region.name}`);
        break;
      }
      case 3: {
        const [name, at, width] = r.pick([
          ['e_phoff', f.e_phoff, w],
          ['e_shoff', f.e_shoff, w],
          ['e_phentsize', f.e_phentsize, 2],
          ['e_phnum', f.e_phnum, 2],
          ['e_shentsize', f.e_shentsize, 2],
          ['e_shnum', f.e_shnum, 2],
          ['e_shstrndx', f.e_shnum + 2, 2],
        ] as const);
        put(at, width, BigInt.asUintN(width * 8, r.pick(values)), name);
        break;
      }
      case 4: {
        const ph = layout.programHeaders[r.below(layout.programHeaders.length)];
        if (ph === undefined) break;
        const [name, at, width] = r.pick([
          ['p_type', ph.at, 4],
          ['p_offset', ph.at + f.p_offset, w],
          ['p_vaddr', ph.at + f.p_offset + w, w],
          ['p_filesz', ph.at + f.p_filesz, w],
        ] as const);
        const value = name === 'p_type' ? r.pick([0n, 1n, 2n, 3n, 6n, 0xffffffffn]) : BigInt.asUintN(width * 8, r.pick(values));
        put(at, width, value, name);
        break;
      }
      case 5: {
        const entries = layout.dynamic?.entries ?? [];
        const entry = entries[r.below(entries.length)];
        if (entry === undefined) break;
        if (r.below(2) === 0) put(entry.at, w, BigInt.asUintN(w * 8, r.pick(INTERESTING_TAGS)), 'd_tag');
        else put(entry.at + w, w, BigInt.asUintN(w * 8, r.pick(values)), `d_val(tag ${entry.tag})`);
        break;
      }
      case 6: {
        // A string table entry's NUL removed, or every NUL of a region removed.
        const at = region.start + r.below(region.end - region.start);
        const end = r.below(4) === 0 ? region.end : Math.min(region.end, at + 1 + r.below(64));
        for (let j = at; j < end; j++) if (bytes[j] === 0) bytes[j] = 0x2f;
        what.push(`no NUL ${region.name}@0x${at.toString(16)}..0x${end.toString(16)}`);
        break;
      }
      default: {
        const length = region.start + r.below(region.end - region.start + 1);
        bytes = bytes.slice(0, length);
        what.push(`truncate at 0x${length.toString(16)} (${region.name})`);
      }
    }
  }
  return { bytes, what };
}

interface Failure {
  fixture: string;
  iteration: number;
  mutation: string;
  problem: string;
}

async function readAll(bytes: Uint8Array): Promise<void> {
  const image = await readElfImage(new MemoryByteSource(bytes));
  await summarize(image);
  await readSectionHeaders(image);
}

const all = fixtures();

/**
 * Small files of each class and byte order and of each linker's layout (mutation needs thousands of
 * copies), plus a .dynstr over 16 KiB (read in chunks, not whole) and a file without section headers.
 */
const TARGETS: readonly [string, (f: Fixture) => boolean][] = [
  ...(['x86_64', 'aarch64', 'arm', 'ppc64'] as const).flatMap((arch): [string, (f: Fixture) => boolean][] => [
    [`${arch} library with a runpath`, (f) => f.arch === arch && f.kind === 'shared' && f.linker === 'bfd' && f.tags.includes('runpath') && f.tags.length === 1],
    [`${arch} PIE with a runpath`, (f) => f.arch === arch && f.kind === 'pie' && f.linker === 'bfd' && f.tags.includes('runpath') && f.tags.length === 1],
  ]),
  ['x86_64 executable with an rpath', (f) => f.arch === 'x86_64' && f.kind === 'exec' && f.tags.includes('rpath')],
  ['x86_64 library linked by lld', (f) => f.arch === 'x86_64' && f.kind === 'shared' && f.linker === 'lld'],
  ['x86_64 PIE linked by gold', (f) => f.arch === 'x86_64' && f.kind === 'pie' && f.linker === 'gold'],
  ['x86_64 library without section headers', (f) => f.arch === 'x86_64' && f.tags.includes('no-sections')],
  ['x86_64 library with a big .dynstr', (f) => f.arch === 'x86_64' && f.tags.includes('big-dynstr')],
];

function targets(): Fixture[] {
  const compiled = all.filter((f) => f.origin === 'compiled').sort((a, b) => a.id.localeCompare(b.id));
  return TARGETS.map(([description, predicate]) => {
    const found = compiled.find(predicate);
    if (found === undefined) throw new Error(`no compiled fixture is an ${description}`);
    return found;
  });
}

interface Base {
  readonly fixture: Fixture;
  readonly bytes: Uint8Array;
}

interface Run {
  readonly failures: Failure[];
  readonly total: number;
  readonly refused: number;
  readonly slowest: number;
}

async function mutateAll(bases: readonly Base[], watchdog: Watchdog): Promise<Run> {
  const failures: Failure[] = [];
  let total = 0;
  let refused = 0;
  let slowest = 0;
  for (const [fileIndex, { fixture, bytes: base }] of bases.entries()) {
    // Every base must read cleanly, or the mutations would test nothing but the first error.
    await readAll(base);
    const layout = rawLayout(base);
    for (let iteration = 0; iteration < MUTATIONS_PER_FILE; iteration++) {
      const r = rng((SEED ^ Math.imul(fileIndex + 1, 0x9e3779b9) ^ Math.imul(iteration + 1, 0x85ebca6b)) >>> 0);
      const { bytes, what } = mutate(base, layout, r);
      watchdog.pet(`FUZZ_SEED=${SEED.toString(16)} ${fixture.id} iteration ${iteration}: ${what.join('; ')}`);
      const started = performance.now();
      let problem: string | null = null;
      try {
        await readAll(bytes);
      } catch (error) {
        refused++;
        if (!(error instanceof CudaPatchelfError)) {
          problem = `${error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ''}` : String(error)}`;
        } else if (error.kind !== 'format') {
          problem = `kind ${error.kind}: ${error.message}`;
        } else if (/NaN|undefined|Infinity/.test(error.describe())) {
          problem = `unreadable message: ${error.describe()}`;
        } else if (error.offset !== undefined && !(Number.isInteger(error.offset) && error.offset >= 0)) {
          problem = `offset ${error.offset} is not a file offset: ${error.describe()}`;
        }
      }
      const ms = performance.now() - started;
      slowest = Math.max(slowest, ms);
      if (ms > PER_CALL_MS) problem = `${problem ?? ''} took ${ms.toFixed(0)} ms`;
      if (problem !== null) failures.push({ fixture: fixture.id, iteration, mutation: what.join('; '), problem });
      total++;
    }
  }
  return { failures, total, refused, slowest };
}

describe(`seeded mutation (FUZZ_SEED=${SEED.toString(16)})`, () => {
  it('only CudaPatchelfError escapes the reader, and every read is quick', async () => {
    const bases = await Promise.all(targets().map(async (f) => ({ fixture: f, bytes: new Uint8Array(await readFile(f.path)) })));
    const kinds = new Set(bases.map(({ bytes }) => `${bytes[4]}/${bytes[5]}`));
    // ELF64 LE, ELF32 LE and ELF64 BE at least.
    expect(kinds.size, [...kinds].join(' ')).toBeGreaterThanOrEqual(3);

    // A reader stuck in a synchronous loop never yields to the test's own timeout.
    const watchdog = new Watchdog(PER_CALL_MS * 2);
    let run: Run;
    try {
      run = await mutateAll(bases, watchdog);
    } finally {
      await watchdog.stop();
    }
    const { failures, total, refused, slowest } = run;
    console.info(`FUZZ_SEED=${SEED.toString(16)}: ${total} mutations of ${bases.length} files, ${refused} refused, slowest read ${slowest.toFixed(1)} ms`);
    expect(failures.slice(0, 5), `FUZZ_SEED=${SEED.toString(16)}: ${failures.length} failures`).toEqual([]);
    expect(total).toBeGreaterThanOrEqual(MIN_MUTATIONS);
    // Mutations that every reader would accept prove nothing; most must hit something the reader checks.
    expect(refused).toBeGreaterThan(total / 4);
    expect(refused).toBeLessThan(total);
    expect(slowest).toBeLessThan(PER_CALL_MS);
  });
});
