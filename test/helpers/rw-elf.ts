// Byte-level transforms of little-endian ELF64 files (x86_64, aarch64), for inputs no linker produces:
// a program header table that does not follow the ELF header. Written against the gABI field offsets
// (the segment types are src/elf/constants.ts's), not against the reader under test.

import { PT } from '../../src/elf/constants.js';

const E_PHOFF = 0x20;
const E_SHOFF = 0x28;
const E_PHENTSIZE = 0x36;
const E_PHNUM = 0x38;
const E_SHENTSIZE = 0x3a;
const E_SHNUM = 0x3c;
const PHDR_SIZE = 56;
const SHDR_SIZE = 64;

export interface RawSegment {
  p_type: number;
  p_flags: number;
  p_offset: number;
  p_vaddr: number;
  p_paddr: number;
  p_filesz: number;
  p_memsz: number;
  p_align: number;
}

function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function check(bytes: Uint8Array): void {
  if (bytes[0] !== 0x7f || bytes[1] !== 0x45 || bytes[4] !== 2 || bytes[5] !== 1) throw new Error('not a little-endian ELF64 file');
  if (view(bytes).getUint16(E_PHENTSIZE, true) !== PHDR_SIZE) throw new Error('unexpected e_phentsize');
}

function readSegments(bytes: Uint8Array): { phoff: number; segments: RawSegment[] } {
  check(bytes);
  const v = view(bytes);
  const phoff = Number(v.getBigUint64(E_PHOFF, true));
  const phnum = v.getUint16(E_PHNUM, true);
  const segments: RawSegment[] = [];
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * PHDR_SIZE;
    segments.push({
      p_type: v.getUint32(at, true),
      p_flags: v.getUint32(at + 4, true),
      p_offset: Number(v.getBigUint64(at + 8, true)),
      p_vaddr: Number(v.getBigUint64(at + 16, true)),
      p_paddr: Number(v.getBigUint64(at + 24, true)),
      p_filesz: Number(v.getBigUint64(at + 32, true)),
      p_memsz: Number(v.getBigUint64(at + 40, true)),
      p_align: Number(v.getBigUint64(at + 48, true)),
    });
  }
  return { phoff, segments };
}

function encodeSegments(segments: readonly RawSegment[]): Uint8Array {
  const out = new Uint8Array(segments.length * PHDR_SIZE);
  const v = view(out);
  segments.forEach((s, i) => {
    const at = i * PHDR_SIZE;
    v.setUint32(at, s.p_type, true);
    v.setUint32(at + 4, s.p_flags, true);
    v.setBigUint64(at + 8, BigInt(s.p_offset), true);
    v.setBigUint64(at + 16, BigInt(s.p_vaddr), true);
    v.setBigUint64(at + 24, BigInt(s.p_paddr), true);
    v.setBigUint64(at + 32, BigInt(s.p_filesz), true);
    v.setBigUint64(at + 40, BigInt(s.p_memsz), true);
    v.setBigUint64(at + 48, BigInt(s.p_align), true);
  });
  return out;
}

/** Points the section header whose sh_offset is `from` at a new offset and address. */
function moveSectionHeader(bytes: Uint8Array, from: number, to: number, toAddress: number): void {
  const v = view(bytes);
  const shoff = Number(v.getBigUint64(E_SHOFF, true));
  const shnum = v.getUint16(E_SHNUM, true);
  if (shoff === 0) return;
  if (v.getUint16(E_SHENTSIZE, true) !== SHDR_SIZE) throw new Error('unexpected e_shentsize');
  for (let i = 1; i < shnum; i++) {
    const at = shoff + i * SHDR_SIZE;
    if (Number(v.getBigUint64(at + 0x18, true)) === from && v.getBigUint64(at + 0x20, true) !== 0n) {
      v.setBigUint64(at + 0x18, BigInt(to), true);
      v.setBigUint64(at + 0x10, BigInt(toAddress), true);
    }
  }
}

export interface RelocateOptions {
  /** File offset of the room (inside the first PT_LOAD, which must map file offset 0) that takes the table. */
  readonly roomOffset: number;
  readonly roomSize: number;
  /** Add this many PT_NULL entries at the end of the relocated table. */
  readonly spareNullEntries: number;
  /**
   * Put the bytes of the PT_INTERP (executables) or of the first PT_NOTE (libraries) where the table
   * was, right after the ELF header, so that a tool that still writes a table there destroys live data.
   */
  readonly occupyOldPlace: boolean;
}

/**
 * Moves the program header table from right after the ELF header into `room` (zeroed bytes the linker
 * reserved inside the first PT_LOAD), keeping PT_PHDR, e_phoff and e_phnum consistent: a layout that
 * glibc, the kernel and qemu all accept, as long as the table stays inside the first PT_LOAD.
 */
export function relocateProgramHeaders(original: Uint8Array, options: RelocateOptions): Uint8Array {
  const bytes = Uint8Array.from(original);
  const v = view(bytes);
  const { phoff, segments } = readSegments(bytes);
  const ehsize = v.getUint16(0x34, true);
  if (phoff !== ehsize) throw new Error(`the table already starts at 0x${phoff.toString(16)}`);
  const first = segments.find((s) => s.p_type === PT.PT_LOAD);
  if (first === undefined || first.p_offset !== 0) throw new Error('the first PT_LOAD does not map the start of the file');
  const count = segments.length + options.spareNullEntries;
  if (count * PHDR_SIZE > options.roomSize) throw new Error('the room is too small for the table');
  if (options.roomOffset + count * PHDR_SIZE > first.p_filesz) throw new Error('the room is not inside the first PT_LOAD');
  const roomAddress = first.p_vaddr + options.roomOffset;

  const moved = segments.map((s) => ({ ...s }));
  for (const s of moved) {
    if (s.p_type !== PT.PT_PHDR) continue;
    s.p_offset = options.roomOffset;
    s.p_vaddr = roomAddress;
    s.p_paddr = roomAddress;
    s.p_filesz = count * PHDR_SIZE;
    s.p_memsz = count * PHDR_SIZE;
  }
  for (let i = 0; i < options.spareNullEntries; i++)
    moved.push({ p_type: PT.PT_NULL, p_flags: 0, p_offset: 0, p_vaddr: 0, p_paddr: 0, p_filesz: 0, p_memsz: 0, p_align: 0 });

  // The old place: zeroed, then optionally given to a live range.
  bytes.fill(0, phoff, phoff + segments.length * PHDR_SIZE);
  if (options.occupyOldPlace) {
    const live = moved.find((s) => s.p_type === PT.PT_INTERP) ?? moved.find((s) => s.p_type === PT.PT_NOTE);
    if (live === undefined) throw new Error('no PT_INTERP or PT_NOTE to put after the ELF header');
    const target = ehsize;
    if (live.p_filesz > segments.length * PHDR_SIZE) throw new Error('the live range does not fit where the table was');
    const content = original.slice(live.p_offset, live.p_offset + live.p_filesz);
    const from = live.p_offset;
    for (const s of moved) {
      if ((s.p_type === live.p_type || s.p_type === PT.PT_GNU_PROPERTY) && s.p_offset === from) {
        // PT_GNU_PROPERTY shares the range of the property note.
        s.p_offset = target;
        s.p_vaddr = first.p_vaddr + target;
        s.p_paddr = first.p_vaddr + target;
      }
    }
    bytes.fill(0, from, from + content.length);
    bytes.set(content, target);
    moveSectionHeader(bytes, from, target, first.p_vaddr + target);
  }

  bytes.set(encodeSegments(moved), options.roomOffset);
  v.setBigUint64(E_PHOFF, BigInt(options.roomOffset), true);
  v.setUint16(E_PHNUM, count, true);
  return bytes;
}

/**
 * ELF32 little endian: makes the highest PT_LOAD reach `end` in memory (more zero-filled memory, as a
 * large .bss would), leaving no room above it in a 32-bit address space.
 */
export function stretchHighestLoad32(original: Uint8Array, end: number): Uint8Array {
  const bytes = Uint8Array.from(original);
  const v = view(bytes);
  if (bytes[0] !== 0x7f || bytes[4] !== 1 || bytes[5] !== 1) throw new Error('not a little-endian ELF32 file');
  const phoff = v.getUint32(0x1c, true);
  const phentsize = v.getUint16(0x2a, true);
  const phnum = v.getUint16(0x2c, true);
  let highest = -1;
  let highestVaddr = -1;
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    if (v.getUint32(at, true) === PT.PT_LOAD && v.getUint32(at + 8, true) > highestVaddr) {
      highest = at;
      highestVaddr = v.getUint32(at + 8, true);
    }
  }
  if (highest < 0 || end <= highestVaddr) throw new Error('no PT_LOAD below the requested end');
  v.setUint32(highest + 20, end - highestVaddr, true);
  return bytes;
}
