// What each corpus file holds, as readelf -hld and --dyn-syms read it (binutils, no code shared with
// the reader). One row per file; the reader and planner tests are driven by this table, as Go's debug/elf
// file_test.go is by its fileTests.

import { EM, ET, PF_R, PF_W, PF_X, PT } from '../../src/elf/constants.js';

/** [p_type, p_offset, p_vaddr, p_filesz, p_memsz, p_flags, p_align], readelf -l's columns. */
export type ProgramHeaderRow = readonly [number, number, number, number, number, number, number];

export interface CorpusFile {
  readonly name: string;
  readonly elfClass: 32 | 64;
  readonly littleEndian: boolean;
  readonly machine: number;
  readonly type: number;
  readonly entry: number;
  readonly programHeaders: readonly ProgramHeaderRow[];
  readonly interpreter: string | null;
  readonly needed: readonly string[];
  readonly soname: string | null;
  readonly runpath: string | null;
  readonly rpath: string | null;
  /** Live dynamic entries (before the first DT_NULL). */
  readonly dynamicEntries: number;
  /** DT_NULL slots after the terminator. */
  readonly spareSlots: number;
  /** The largest st_size among the .dynsym entries (readelf --dyn-syms). */
  readonly largestSymbolSize: number;
}

const { PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_PHDR, PT_GNU_STACK, PT_GNU_RELRO, PT_GNU_EH_FRAME } = PT;
const R = PF_R;
const RW = PF_R | PF_W;
const RX = PF_R | PF_X;

export const CORPUS: readonly CorpusFile[] = [
  {
    name: 'x86_64-pie-runpath.elf',
    elfClass: 64,
    littleEndian: true,
    machine: EM.EM_X86_64,
    type: ET.ET_DYN,
    entry: 0x2d0,
    programHeaders: [
      [PT_PHDR, 0x40, 0x40, 0x188, 0x188, R, 8],
      [PT_INTERP, 0x1c8, 0x1c8, 0x1c, 0x1c, R, 1],
      [PT_LOAD, 0, 0, 0x2d8, 0x2d8, RX, 0x1000],
      [PT_LOAD, 0xe88, 0x1e88, 0x180, 0x180, RW, 0x1000],
      [PT_DYNAMIC, 0xe88, 0x1e88, 0x160, 0x160, RW, 8],
      [PT_GNU_STACK, 0, 0, 0, 0, RW, 0x10],
      [PT_GNU_RELRO, 0xe88, 0x1e88, 0x178, 0x178, R, 1],
    ],
    interpreter: '/lib64/ld-linux-x86-64.so.2',
    needed: ['libc.so.6'],
    soname: null,
    runpath: '$ORIGIN/../lib:/opt/corpus/lib',
    rpath: null,
    dynamicEntries: 16,
    spareSlots: 5,
    largestSymbolSize: 0,
  },
  {
    name: 'x86_64-lib-plain.so',
    elfClass: 64,
    littleEndian: true,
    machine: EM.EM_X86_64,
    type: ET.ET_DYN,
    entry: 0,
    programHeaders: [
      [PT_LOAD, 0, 0, 0x1e8, 0x1e8, RX, 0x1000],
      [PT_LOAD, 0xf20, 0x1f20, 0xe0, 0xe0, RW, 0x1000],
      [PT_DYNAMIC, 0xf20, 0x1f20, 0xe0, 0xe0, RW, 8],
      [PT_GNU_STACK, 0, 0, 0, 0, RW, 0x10],
      [PT_GNU_RELRO, 0xf20, 0x1f20, 0xe0, 0xe0, R, 1],
    ],
    interpreter: null,
    needed: ['libm.so.6', 'libc.so.6'],
    soname: 'libplain.so.1',
    runpath: null,
    rpath: null,
    dynamicEntries: 8,
    spareSlots: 5,
    largestSymbolSize: 6,
  },
  {
    name: 'x86_64-lib-rpath.so',
    elfClass: 64,
    littleEndian: true,
    machine: EM.EM_X86_64,
    type: ET.ET_DYN,
    entry: 0,
    programHeaders: [
      [PT_LOAD, 0, 0, 0x1f0, 0x1f0, RX, 0x1000],
      [PT_LOAD, 0xf20, 0x1f20, 0xe0, 0xe0, RW, 0x1000],
      [PT_DYNAMIC, 0xf20, 0x1f20, 0xe0, 0xe0, RW, 8],
      [PT_GNU_STACK, 0, 0, 0, 0, RW, 0x10],
      [PT_GNU_RELRO, 0xf20, 0x1f20, 0xe0, 0xe0, R, 1],
    ],
    interpreter: null,
    needed: ['libc.so.6'],
    soname: 'librpath.so.1',
    runpath: null,
    rpath: '/opt/corpus/rpath',
    dynamicEntries: 8,
    spareSlots: 5,
    largestSymbolSize: 6,
  },
  {
    name: 'x86_64-lib-lld.so',
    elfClass: 64,
    littleEndian: true,
    machine: EM.EM_X86_64,
    type: ET.ET_DYN,
    entry: 0,
    programHeaders: [
      [PT_PHDR, 0x40, 0x40, 0x1c0, 0x1c0, R, 8],
      [PT_LOAD, 0, 0, 0x284, 0x284, R, 0x1000],
      [PT_LOAD, 0x284, 0x1284, 6, 6, RX, 0x1000],
      [PT_LOAD, 0x290, 0x2290, 0x90, 0x90, RW, 0x1000],
      [PT_DYNAMIC, 0x290, 0x2290, 0x90, 0x90, RW, 8],
      [PT_GNU_RELRO, 0x290, 0x2290, 0x90, 0xd70, R, 1],
      [PT_GNU_STACK, 0, 0, 0, 0, RW, 0],
    ],
    interpreter: null,
    needed: ['libc.so.6'],
    soname: 'liblld.so.1',
    runpath: '/opt/corpus/lld',
    rpath: null,
    dynamicEntries: 8,
    spareSlots: 0,
    largestSymbolSize: 6,
  },
  {
    name: 'aarch64-lib-64k.so',
    elfClass: 64,
    littleEndian: true,
    machine: EM.EM_AARCH64,
    type: ET.ET_DYN,
    entry: 0,
    programHeaders: [
      [PT_LOAD, 0, 0, 0x230, 0x230, RX, 0x10000],
      [PT_LOAD, 0x230, 0x10230, 0x100, 0x100, RW, 0x10000],
      [PT_DYNAMIC, 0x230, 0x10230, 0xe0, 0xe0, RW, 8],
      [PT_GNU_EH_FRAME, 0x1f0, 0x1f0, 0x14, 0x14, R, 4],
      [PT_GNU_STACK, 0, 0, 0, 0, RW, 0x10],
    ],
    interpreter: null,
    needed: ['libc.so.6'],
    soname: 'libarm64.so.1',
    runpath: '/opt/corpus/arm64',
    rpath: null,
    dynamicEntries: 8,
    spareSlots: 5,
    largestSymbolSize: 8,
  },
  {
    name: 'arm32-lib.so',
    elfClass: 32,
    littleEndian: true,
    machine: EM.EM_ARM,
    type: ET.ET_DYN,
    entry: 0,
    programHeaders: [
      [PT_LOAD, 0, 0, 0x150, 0x150, RX, 0x1000],
      [PT_LOAD, 0xf90, 0x1f90, 0x7c, 0x7c, RW, 0x1000],
      [PT_DYNAMIC, 0xf90, 0x1f90, 0x70, 0x70, RW, 4],
      [PT_GNU_STACK, 0, 0, 0, 0, RW, 0x10],
      [PT_GNU_RELRO, 0xf90, 0x1f90, 0x70, 0x70, R, 1],
    ],
    interpreter: null,
    needed: ['libc.so.6'],
    soname: 'libarm32.so.1',
    runpath: '/opt/corpus/arm32',
    rpath: null,
    dynamicEntries: 8,
    spareSlots: 5,
    largestSymbolSize: 4,
  },
  {
    name: 'ppc64be-lib.so',
    elfClass: 64,
    littleEndian: false,
    machine: EM.EM_PPC64,
    type: ET.ET_DYN,
    entry: 0,
    programHeaders: [
      [PT_LOAD, 0, 0, 0x1ec, 0x1ec, RX, 0x10000],
      [PT_LOAD, 0x1f0, 0x101f0, 0x218, 0x218, RW, 0x10000],
      [PT_DYNAMIC, 0x1f0, 0x101f0, 0x110, 0x110, RW, 8],
    ],
    interpreter: null,
    needed: ['libc.so.6'],
    soname: 'libppc64.so.1',
    runpath: '/opt/corpus/ppc64',
    rpath: null,
    dynamicEntries: 12,
    spareSlots: 4,
    largestSymbolSize: 20,
  },
];
