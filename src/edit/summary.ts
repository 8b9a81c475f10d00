// What `cuda-patchelf print` reports about one file: a plain record with stable field names.

import {
  type ByteString,
  cudaCompatNoteRecord,
  type CudaCompatNoteRecord,
  DF_1_NAMES,
  DF_NAMES,
  DT,
  dynamicStringsOf,
  dynamicValue,
  type ElfImage,
  EM_NAMES,
  ET_NAMES,
  flagNames,
  lastDynamicString,
  nameOf,
  PT,
  readCudaCompatNote,
} from '../elf/elf.js';
import { skipReason } from './skip-reason.js';

export interface LoadSummary {
  readonly offset: number;
  readonly vaddr: number;
  readonly filesz: number;
  readonly memsz: number;
  readonly align: number;
  /** `R`, `W`, `E` as readelf prints them, e.g. `R E`. */
  readonly flags: string;
}

export interface ElfSummary {
  readonly class: 'ELF32' | 'ELF64';
  readonly byteOrder: 'little-endian' | 'big-endian';
  readonly machine: string;
  readonly type: string;
  /**
   * A debug-info file (objcopy --only-keep-debug): program headers without the bytes they map, so no
   * interpreter, dynamic entries or runpath to show.
   */
  readonly debugInfo: boolean;
  /** The interpreter path and the dynamic strings, as byte strings. */
  readonly interpreter: ByteString | null;
  readonly soname: ByteString | null;
  readonly needed: ByteString[];
  readonly rpath: ByteString | null;
  readonly runpath: ByteString | null;
  /** Names of the DT_FLAGS bits. */
  readonly flags: string[];
  /** Names of the DT_FLAGS_1 bits. */
  readonly flags1: string[];
  readonly loads: LoadSummary[];
  /** DT_NULL slots after the terminator (room for new tags in place); null without a dynamic array. */
  readonly spareDynamicSlots: number | null;
  /**
   * A CUDA compat libcuda's `.note.cuda.fwd_compatibility`: the CUDA release, driver branches and
   * devices it lists, or why the note cannot be read; null for a file without one.
   */
  readonly cudaCompat: CudaCompatNoteRecord;
  /** Whether `apply` visits this file, and why not when it does not. */
  readonly visit: boolean;
  readonly skipReason: string | null;
}

function segmentFlags(p_flags: number): string {
  return [(p_flags & 4) !== 0 ? 'R' : ' ', (p_flags & 2) !== 0 ? 'W' : ' ', (p_flags & 1) !== 0 ? 'E' : ' '].join('');
}

/** What `print` shows of a file; a tag that should appear once (DT_SONAME, DT_RPATH, DT_RUNPATH) as the loader reads it. */
export async function summarize(image: ElfImage): Promise<ElfSummary> {
  const { header, codec, dynamic } = image;
  const reason = skipReason(image);
  return {
    class: codec.elfClass === 64 ? 'ELF64' : 'ELF32',
    byteOrder: codec.littleEndian ? 'little-endian' : 'big-endian',
    machine: nameOf(EM_NAMES, header.e_machine),
    type: nameOf(ET_NAMES, header.e_type),
    debugInfo: image.debugInfo,
    interpreter: image.interpreter,
    soname: await lastDynamicString(image, DT.DT_SONAME),
    needed: await dynamicStringsOf(image, DT.DT_NEEDED),
    rpath: await lastDynamicString(image, DT.DT_RPATH),
    runpath: await lastDynamicString(image, DT.DT_RUNPATH),
    flags: dynamic === null ? [] : flagNames(DF_NAMES, dynamicValue(dynamic, DT.DT_FLAGS) ?? 0),
    flags1: dynamic === null ? [] : flagNames(DF_1_NAMES, dynamicValue(dynamic, DT.DT_FLAGS_1) ?? 0),
    loads: image.programHeaders
      .filter((ph) => ph.p_type === PT.PT_LOAD)
      .map((ph) => ({
        offset: ph.p_offset,
        vaddr: ph.p_vaddr,
        filesz: ph.p_filesz,
        memsz: ph.p_memsz,
        align: ph.p_align,
        flags: segmentFlags(ph.p_flags),
      })),
    spareDynamicSlots: dynamic === null ? null : dynamic.spareSlots,
    cudaCompat: cudaCompatNoteRecord(await readCudaCompatNote(image)),
    visit: reason === null,
    skipReason: reason,
  };
}
