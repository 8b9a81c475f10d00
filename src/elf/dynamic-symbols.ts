// The dynamic symbol table (.dynsym, DT_SYMTAB): where it lies and how many entries it has (the
// dynamic array does not say), and, when a plan asks, every entry's name and the largest size.

import { checkRange, dataViewOf, type ByteSource } from './byte-source.js';
import { SYM, type ElfCodec } from './codec.js';
import { DT, SHT } from './constants.js';
import { dynamicValue, fileOffsetOf, type ElfImage } from './elf-image.js';
import { gnuHashSymbolCount } from './gnu-hash.js';
import type { Section } from './section-headers.js';
import { CudaPatchelfError, malformedInput } from '../errors/cuda-patchelf-error.js';

export interface DynamicSymbolTable {
  readonly offset: number;
  readonly count: number;
  readonly entrySize: number;
}

/** Where .dynsym lies, checked to be inside the file; null when the file has none. */
export async function locateDynamicSymbols(image: ElfImage, sections: readonly Section[]): Promise<DynamicSymbolTable | null> {
  const dynamic = image.dynamic;
  if (dynamic === null) return null;
  const address = dynamicValue(dynamic, DT.DT_SYMTAB);
  if (address === undefined) return null;
  const entrySize = dynamicValue(dynamic, DT.DT_SYMENT) ?? image.codec.sizeOf(SYM);
  if (entrySize < 4) throw malformedInput(`DT_SYMENT ${entrySize} is smaller than a symbol name field`, dynamic.offset);
  const count = await dynamicSymbolCount(image, sections);
  if (count === 0) return null;
  const offset = fileOffsetOf(image.programHeaders, address, count * entrySize, 'dynamic symbol table (DT_SYMTAB)');
  checkRange(image.source.size, offset, count * entrySize, 'dynamic symbol table');
  return { offset, count, entrySize };
}

/** What a plan may need of the .dynsym entries: their names, and the largest st_size among them. */
export interface DynamicSymbols {
  readonly names: Uint32Array;
  /** 0 for a file without .dynsym. Above 2^53 (no real symbol is) it comes back rounded. */
  readonly largestSize: number;
}

/** The st_name of every .dynsym entry and the largest st_size, in one read. */
export async function readDynamicSymbols(source: ByteSource, codec: ElfCodec, table: DynamicSymbolTable | null): Promise<DynamicSymbols> {
  if (table === null) return { names: new Uint32Array(0), largestSize: 0 };
  const { offset, count, entrySize } = table;
  const bytes = await source.read(offset, count * entrySize, 'dynamic symbol table');
  const view = dataViewOf(bytes);
  const le = codec.littleEndian;
  const names = new Uint32Array(count);
  const sizeAt = codec.fieldOffset(SYM, 'st_size');
  // DT_SYMENT may be smaller than a symbol (it is checked to hold st_name only): no size is read then.
  const sized = entrySize >= codec.sizeOf(SYM);
  let largestSize = 0;
  for (let i = 0; i < count; i++) {
    const at = i * entrySize;
    // st_name is the first word of Elf32_Sym and Elf64_Sym alike.
    names[i] = view.getUint32(at, le);
    if (!sized) continue;
    const size = codec.elfClass === 32 ? view.getUint32(at + sizeAt, le) : wordPair(view, at + sizeAt, le);
    if (size > largestSize) largestSize = size;
  }
  return { names, largestSize };
}

/** An unsigned 64-bit field as a number (two 32-bit reads: no BigInt per symbol). */
function wordPair(view: DataView, at: number, littleEndian: boolean): number {
  const low = view.getUint32(littleEndian ? at : at + 4, littleEndian);
  const high = view.getUint32(littleEndian ? at + 4 : at, littleEndian);
  return high * 2 ** 32 + low;
}

/**
 * The number of .dynsym entries. The dynamic array does not say it directly: DT_HASH's nchain does;
 * else it is found by walking DT_GNU_HASH's chains to the last symbol; else from the section header.
 */
async function dynamicSymbolCount(image: ElfImage, sections: readonly Section[]): Promise<number> {
  const dynamic = image.dynamic;
  if (dynamic === null) return 0;
  const { source, codec, programHeaders } = image;
  const le = codec.littleEndian;
  const hash = dynamicValue(dynamic, DT.DT_HASH);
  if (hash !== undefined) {
    const at = fileOffsetOf(programHeaders, hash, 8, 'symbol hash table (DT_HASH)');
    const words = await source.read(at, 8, 'symbol hash table header');
    return dataViewOf(words).getUint32(4, le);
  }
  // DT_GNU_HASH only counts up to the last hashed symbol: a file that exports nothing has an empty
  // table (GNU ld then says symoffset 1 whatever the number of imports). Over-counting only makes
  // more strings look shared, so the largest of the estimates is taken.
  const gnuHash = dynamicValue(dynamic, DT.DT_GNU_HASH);
  const dynsym = sections.find((s) => s.sh_type === SHT.SHT_DYNSYM);
  const fromSection = dynsym === undefined || dynsym.sh_entsize === 0 ? 0 : Math.floor(dynsym.sh_size / dynsym.sh_entsize);
  const symtab = dynamicValue(dynamic, DT.DT_SYMTAB) ?? 0;
  const strtab = dynamicValue(dynamic, DT.DT_STRTAB) ?? 0;
  const entrySize = dynamicValue(dynamic, DT.DT_SYMENT) ?? codec.sizeOf(SYM);
  // The usual layout puts .dynstr right after .dynsym: the gap between them bounds the table.
  const fromLayout =
    strtab > symtab && entrySize > 0 && strtab - symtab <= source.size && mapsInFile(image, symtab, strtab - symtab)
      ? Math.floor((strtab - symtab) / entrySize)
      : 0;
  const fromHash = gnuHash === undefined ? 0 : await gnuHashSymbolCount(image, gnuHash);
  return Math.max(fromHash, fromSection, gnuHash === undefined || fromHash <= 1 ? fromLayout : 0);
}

function mapsInFile(image: ElfImage, address: number, length: number): boolean {
  try {
    fileOffsetOf(image.programHeaders, address, length, 'dynamic symbol table');
    return true;
  } catch (error) {
    if (!(error instanceof CudaPatchelfError)) throw error;
    return false;
  }
}
