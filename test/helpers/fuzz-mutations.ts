// Seeded, structure-aware mutation of real ELF files: header fields, program headers, dynamic entries,
// string table bytes, section headers, the records the dynamic tags point at, sizes and counts. The
// structures are located with malformed.ts's own small decoder, never with the reader under test.
//
// Every mutation comes from a generator seeded by (seed, file, iteration), so one failing input is
// replayed from three numbers.

import { fieldOffsets, readUnsigned, writeUnsigned, type RawLayout } from './malformed.js';
import { DT, PT } from '../../src/elf/constants.js';

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

export interface Rng {
  below(n: number): number;
  pick<T>(items: readonly T[]): T;
}

export function rng(seed: number): Rng {
  const next = mulberry32(seed);
  return {
    below: (n) => Math.floor(next() * n),
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)] as T,
  };
}

/** The generator of one input: independent of every other input, so any one replays alone. */
export function inputRng(seed: number, fileIndex: number, iteration: number): Rng {
  return rng((seed ^ Math.imul(fileIndex + 1, 0x9e3779b9) ^ Math.imul(iteration + 1, 0x85ebca6b)) >>> 0);
}

/** String tags: their values are offsets into DT_STRTAB. */
const STRING_TAGS: readonly number[] = [DT.DT_NEEDED, DT.DT_SONAME, DT.DT_RPATH, DT.DT_RUNPATH];

interface Region {
  readonly name: string;
  readonly start: number;
  readonly end: number;
}

/** File offset of `vaddr` through the PT_LOADs, or null when no segment maps it. */
function offsetOf(layout: RawLayout, vaddr: number): number | null {
  const load = layout.programHeaders.find((ph) => ph.type === PT.PT_LOAD && vaddr >= ph.vaddr && vaddr < ph.vaddr + ph.filesz);
  return load === undefined ? null : load.offset + (vaddr - load.vaddr);
}

/** Records a tag points at: the first bytes of each (their headers and first entries). */
const POINTED_AT: readonly [string, number][] = [
  ['DT_SYMTAB', DT.DT_SYMTAB],
  ['DT_HASH', DT.DT_HASH],
  ['DT_GNU_HASH', DT.DT_GNU_HASH],
  ['DT_VERSYM', DT.DT_VERSYM],
  ['DT_VERDEF', DT.DT_VERDEF],
  ['DT_VERNEED', DT.DT_VERNEED],
];
const POINTED_AT_BYTES = 256;

function regionsOf(layout: RawLayout, size: number): Region[] {
  const regions: Region[] = [
    { name: 'ELF header', start: 0, end: layout.headerSize },
    { name: 'program header table', start: layout.phoff, end: layout.phoff + layout.phnum * layout.phentsize },
  ];
  if (layout.dynamic !== null)
    regions.push({ name: 'dynamic array', start: layout.dynamic.offset, end: layout.dynamic.offset + layout.dynamic.filesz });
  if (layout.dynstr !== null)
    regions.push({ name: '.dynstr', start: layout.dynstr.offset, end: layout.dynstr.offset + layout.dynstr.size });
  if (layout.interp !== null)
    regions.push({ name: 'PT_INTERP', start: layout.interp.offset, end: layout.interp.offset + layout.interp.filesz });
  if (layout.shoff !== 0) regions.push({ name: 'section header table', start: layout.shoff, end: Math.min(size, layout.shoff + 64 * 40) });
  for (const [name, tag] of POINTED_AT) {
    const entry = layout.dynamic?.entries.find((e) => e.tag === tag);
    const at = entry === undefined ? null : offsetOf(layout, entry.val);
    if (at !== null) regions.push({ name, start: at, end: Math.min(size, at + POINTED_AT_BYTES) });
  }
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

/** Tags whose values the reader or the planner follows, and the markers around them. */
const INTERESTING_TAGS = [
  0n,
  1n,
  4n,
  5n,
  6n,
  10n,
  14n,
  15n,
  21n,
  29n,
  30n,
  0x6ffffef5n,
  0x6ffffff0n,
  0x6ffffffbn,
  0x6ffffffcn,
  0x6ffffffen,
  0x6fffffffn,
  0x7fffffffn,
  2n ** 63n,
  2n ** 64n - 1n,
];

/** e_machine values with different page sizes and word sizes (x86_64, aarch64, arm, ppc64, i386, none). */
const MACHINES = [62n, 183n, 40n, 21n, 3n, 0n, 0xffffn];
/** e_type: none, relocatable, executable, shared, core, OS-specific. */
const TYPES = [0n, 1n, 2n, 3n, 4n, 0xfe00n];
/** p_type: null, load, dynamic, interp, note, phdr, GNU_RELRO, and one nobody knows. */
const PROGRAM_TYPES = [0n, 1n, 2n, 3n, 4n, 6n, 0x6474e552n, 0xffffffffn];

export interface Mutation {
  readonly bytes: Uint8Array;
  /** What was done, in words: the replay log of a failure. */
  readonly what: string[];
}

/** Applies one to three mutations to a copy of `base`. */
export function mutate(base: Uint8Array, layout: RawLayout, r: Rng): Mutation {
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
  const word = (): bigint => BigInt.asUintN(w * 8, r.pick(values));
  const entries = layout.dynamic?.entries ?? [];
  const strings = layout.dynstr;
  const count = 1 + r.below(3);
  for (let i = 0; i < count; i++) {
    const region = r.pick(regions);
    switch (r.below(16)) {
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
        // Sizes and counts of the ELF header, and the fields that say what the file is.
        const [name, at, width, choices] = r.pick([
          ['e_phoff', f.e_phoff, w, values],
          ['e_shoff', f.e_shoff, w, values],
          ['e_phentsize', f.e_phentsize, 2, values],
          ['e_phnum', f.e_phnum, 2, values],
          ['e_shentsize', f.e_shentsize, 2, values],
          ['e_shnum', f.e_shnum, 2, values],
          ['e_shstrndx', f.e_shnum + 2, 2, values],
          ['e_type', 16, 2, TYPES],
          ['e_machine', 18, 2, MACHINES],
        ] as const);
        put(at, width, BigInt.asUintN(width * 8, r.pick(choices)), name);
        break;
      }
      case 4: {
        const ph = layout.programHeaders[r.below(layout.programHeaders.length)];
        if (ph === undefined) break;
        // Elf64: type flags offset vaddr paddr filesz memsz align; Elf32: type offset vaddr paddr filesz memsz flags align.
        const [name, at, width] = r.pick([
          ['p_type', ph.at, 4],
          ['p_offset', ph.at + f.p_offset, w],
          ['p_vaddr', ph.at + f.p_offset + w, w],
          ['p_filesz', ph.at + f.p_filesz, w],
          ['p_memsz', ph.at + f.p_filesz + w, w],
          ['p_align', ph.at + f.p_filesz + (w === 8 ? 2 * w : 2 * w + 4), w],
          ['p_flags', ph.at + (w === 8 ? 4 : 24), 4],
        ] as const);
        const value =
          name === 'p_type' ? r.pick(PROGRAM_TYPES) : name === 'p_flags' ? BigInt(r.below(8)) : BigInt.asUintN(width * 8, r.pick(values));
        put(at, width, value, name);
        break;
      }
      case 5: {
        const entry = entries[r.below(entries.length)];
        if (entry === undefined) break;
        if (r.below(2) === 0) put(entry.at, w, BigInt.asUintN(w * 8, r.pick(INTERESTING_TAGS)), 'd_tag');
        else put(entry.at + w, w, word(), `d_val(tag ${entry.tag})`);
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
      case 7: {
        const length = region.start + r.below(region.end - region.start + 1);
        bytes = bytes.slice(0, length);
        what.push(`truncate at 0x${length.toString(16)} (${region.name})`);
        break;
      }
      case 8: {
        // A string tag pointed into the middle of another string (a shared tail) or at the table's end.
        const stringEntries = entries.filter((e) => STRING_TAGS.includes(e.tag));
        const entry = stringEntries[r.below(stringEntries.length)];
        if (entry === undefined || strings === null) break;
        const index = r.below(4) === 0 ? strings.size - 1 + r.below(3) : r.below(strings.size);
        put(entry.at + w, w, BigInt(index), `string tag ${entry.tag} index`);
        break;
      }
      case 9: {
        // One dynamic entry copied over another: duplicate runpaths, a DT_NULL slot taken, a lost terminator.
        const from = entries[r.below(entries.length)];
        const to = entries[r.below(entries.length)];
        if (from === undefined || to === undefined) break;
        bytes.copyWithin(to.at, from.at, from.at + f.dyn);
        what.push(`dynamic entry @0x${from.at.toString(16)} copied to @0x${to.at.toString(16)}`);
        break;
      }
      case 10: {
        // String bytes replaced: high bytes, a separator, or another string's bytes.
        if (strings === null) break;
        const at = strings.offset + r.below(strings.size);
        const length = 1 + r.below(16);
        const fill = r.pick([0x00, 0x3a, 0x24, 0xff, 0x80, 0x41]);
        for (let j = at; j < Math.min(at + length, strings.offset + strings.size, bytes.length); j++) bytes[j] = fill;
        what.push(`.dynstr@0x${at.toString(16)} ${length} bytes = 0x${fill.toString(16)}`);
        break;
      }
      case 11: {
        // A section header field: the planner updates .dynstr's and .dynamic's headers and moves what
        // only tags point at, so wrong section facts must be refused or ignored, never followed blindly.
        const shnum = layout.shoff === 0 || bytes.length < layout.headerSize ? 0 : readUnsigned(bytes, f.e_shnum, 2, le);
        if (shnum === 0) break;
        const at = layout.shoff + r.below(shnum) * f.shdr;
        // Elf64: name type flags addr offset size link info addralign entsize; Elf32: the same, 4-byte words.
        const [name, field, width] = r.pick([
          ['sh_name', 0, 4],
          ['sh_type', 4, 4],
          ['sh_addr', w === 8 ? 16 : 12, w],
          ['sh_offset', w === 8 ? 24 : 16, w],
          ['sh_size', w === 8 ? 32 : 20, w],
          ['sh_link', w === 8 ? 40 : 24, 4],
          ['sh_info', f.sh_info, 4],
        ] as const);
        put(at + field, width, BigInt.asUintN(width * 8, r.pick(values)), name);
        break;
      }
      case 12: {
        // Two program headers swapped: PT_LOADs out of order, PT_PHDR not first.
        const a = layout.programHeaders[r.below(layout.programHeaders.length)];
        const b = layout.programHeaders[r.below(layout.programHeaders.length)];
        if (
          a === undefined ||
          b === undefined ||
          a.at === b.at ||
          a.at + layout.phentsize > bytes.length ||
          b.at + layout.phentsize > bytes.length
        )
          break;
        const saved = bytes.slice(a.at, a.at + layout.phentsize);
        bytes.copyWithin(a.at, b.at, b.at + layout.phentsize);
        bytes.set(saved, b.at);
        what.push(`program headers @0x${a.at.toString(16)} and @0x${b.at.toString(16)} swapped`);
        break;
      }
      case 13: {
        // The file grows: zeros or junk after the end move where appended tables go.
        const extra = r.pick([1, 7, 4096, 65536 + 3]);
        const grown = new Uint8Array(bytes.length + extra);
        grown.set(bytes);
        if (r.below(2) === 0) for (let j = bytes.length; j < grown.length; j++) grown[j] = r.below(256);
        bytes = grown;
        what.push(`grown by ${extra}`);
        break;
      }
      case 14: {
        // A dynamic entry's d_val set to an address near the tables: one off, into another segment.
        const entry = entries[r.below(entries.length)];
        if (entry === undefined) break;
        const delta = BigInt(r.pick([-1, 1, -8, 8, 0x1000, -0x1000, 0x10000]));
        put(entry.at + w, w, BigInt.asUintN(w * 8, BigInt(entry.val) + delta), `d_val(tag ${entry.tag}) ${delta > 0n ? '+' : ''}${delta}`);
        break;
      }
      default: {
        // The string table's size or place: DT_STRSZ/DT_STRTAB a little off.
        const entry = entries.find((e) => e.tag === r.pick([DT.DT_STRTAB, 10]));
        if (entry === undefined) break;
        const delta = BigInt(r.pick([-1, 1, -16, 16, 4096]));
        put(entry.at + w, w, BigInt.asUintN(w * 8, BigInt(entry.val) + delta), `d_val(tag ${entry.tag}) ${delta > 0n ? '+' : ''}${delta}`);
      }
    }
  }
  return { bytes, what };
}
