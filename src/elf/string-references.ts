// Every place outside the dynamic array that refers into the dynamic string table: symbol names
// (.dynsym), version needs (.gnu.version_r) and version definitions (.gnu.version_d). A string's bytes
// may only be reused or cleared when nothing here points into them (the linker shares string tails).

import { checkRange, dataViewOf, type ByteSource } from './byte-source.js';
import { SYM, VERDAUX, VERDEF, VERNAUX, VERNEED, type ElfCodec, type RecordLayout } from './codec.js';
import { DT, SHT } from './constants.js';
import { dynamicValue, fileOffsetOf, type ElfImage } from './elf-image.js';
import type { Section } from './section-headers.js';
import { formatError } from '../errors/cuda-patchelf-error.js';

/**
 * Bytes of a GNU hash chain read at a time: the last chain is usually a few entries long, so the
 * first chunk is small (and often inside a block already read); a long one is read in doubling chunks.
 */
const FIRST_CHAIN_CHUNK = 64;
const LARGEST_CHAIN_CHUNK = 4096;

/** A version record's reference into the dynamic string table. */
export interface StringReference {
  /** Index into the dynamic string table. */
  readonly index: number;
  readonly source: 'version-need-file' | 'version-need-name' | 'version-definition';
  /** File offset of the 4-byte field that holds the index (so a rename can rewrite it). */
  readonly fieldOffset: number;
}

export interface StringReferences {
  /**
   * The st_name of every .dynsym entry: tens of thousands in big libraries, so a typed array. Null
   * until read (readDynamicSymbols): a plan needs them only to tell which strings stay referenced,
   * when one is released or zeroed slack is searched.
   */
  readonly symbolNames: Uint32Array | null;
  readonly versionRecords: readonly StringReference[];
  /** Where .dynsym is (checked to lie inside the file); null when the file has none. */
  readonly dynamicSymbols: DynamicSymbolTable | null;
}

export interface DynamicSymbolTable {
  readonly offset: number;
  readonly count: number;
  readonly entrySize: number;
}

/**
 * Version records are small and close together: they are read through a window instead of one by
 * one. Real version sections are a few hundred bytes to a few KiB, so the window starts small and
 * doubles with each refill: a big first window cost more to fill and collect than the records it held.
 */
const FIRST_RECORD_WINDOW = 512;
const LARGEST_RECORD_WINDOW = 16 * 1024;

class RecordReader {
  private window: Uint8Array = new Uint8Array(0);
  private windowAt = 0;
  private nextWindow = FIRST_RECORD_WINDOW;
  private readonly source: ByteSource;
  private readonly codec: ElfCodec;

  constructor(source: ByteSource, codec: ElfCodec) {
    this.source = source;
    this.codec = codec;
  }

  async read<N extends string>(layout: RecordLayout<N>, offset: number): Promise<Record<N, number>> {
    const size = this.codec.sizeOf(layout);
    if (offset < this.windowAt || offset + size > this.windowAt + this.window.length) {
      const length = Math.max(size, Math.min(this.nextWindow, this.source.size - offset));
      this.window = await this.source.read(offset, length, layout.name);
      this.windowAt = offset;
      this.nextWindow = Math.min(2 * this.nextWindow, LARGEST_RECORD_WINDOW);
    }
    return this.codec.decode(layout, this.window, offset - this.windowAt);
  }
}

/**
 * The version records, and where .dynsym lies (its entries are not read: readDynamicSymbols).
 * `sections`: the file's section headers, already read by the caller (the symbol count may need them).
 */
export async function readStringReferences(image: ElfImage, sections: readonly Section[]): Promise<StringReferences> {
  const versionRecords: StringReference[] = [];
  await versionNeedReferences(image, versionRecords);
  await versionDefinitionReferences(image, versionRecords);
  return { symbolNames: null, versionRecords, dynamicSymbols: await locateDynamicSymbols(image, sections) };
}

async function locateDynamicSymbols(image: ElfImage, sections: readonly Section[]): Promise<DynamicSymbolTable | null> {
  const dynamic = image.dynamic;
  if (dynamic === null) return null;
  const address = dynamicValue(dynamic, DT.DT_SYMTAB);
  if (address === undefined) return null;
  const entrySize = dynamicValue(dynamic, DT.DT_SYMENT) ?? (image.codec.elfClass === 64 ? 24 : 16);
  if (entrySize < 4) throw formatError(`DT_SYMENT ${entrySize} is smaller than a symbol name field`, dynamic.offset);
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
  const entrySize = dynamicValue(dynamic, DT.DT_SYMENT) ?? (codec.elfClass === 64 ? 24 : 16);
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
  } catch {
    return false;
  }
}

async function gnuHashSymbolCount(image: ElfImage, address: number): Promise<number> {
  const { source, codec, programHeaders } = image;
  const le = codec.littleEndian;
  const headerAt = fileOffsetOf(programHeaders, address, 16, 'GNU hash table (DT_GNU_HASH)');
  const header = dataViewOf(await source.read(headerAt, 16, 'GNU hash table header'));
  const bucketCount = header.getUint32(0, le);
  const symbolOffset = header.getUint32(4, le);
  const bloomWords = header.getUint32(8, le);
  const bucketsAt = headerAt + 16 + bloomWords * codec.wordSize;
  const buckets = dataViewOf(await source.read(bucketsAt, bucketCount * 4, 'GNU hash buckets'));
  let last = 0;
  for (let i = 0; i < bucketCount; i++) last = Math.max(last, buckets.getUint32(i * 4, le));
  if (last < symbolOffset) return symbolOffset;
  // Walk the chain of the highest bucket's symbols until the entry with the end bit, a chunk at a time.
  const chainsAt = bucketsAt + bucketCount * 4;
  for (let symbol = last, chunkSize = FIRST_CHAIN_CHUNK; ; chunkSize = Math.min(2 * chunkSize, LARGEST_CHAIN_CHUNK)) {
    const at = chainsAt + (symbol - symbolOffset) * 4;
    const chunk = await source.read(at, Math.min(chunkSize, source.size - at - ((source.size - at) % 4)), 'GNU hash chain');
    if (chunk.length === 0) throw formatError('GNU hash chain runs past the end of the file', at);
    const view = dataViewOf(chunk);
    for (let i = 0; i < chunk.length; i += 4, symbol++) {
      if ((view.getUint32(i, le) & 1) !== 0) return symbol + 1;
    }
  }
}

async function versionNeedReferences(image: ElfImage, out: StringReference[]): Promise<void> {
  const dynamic = image.dynamic;
  if (dynamic === null) return;
  const address = dynamicValue(dynamic, DT.DT_VERNEED);
  if (address === undefined) return;
  const { source, codec, programHeaders } = image;
  const count = Math.min(dynamicValue(dynamic, DT.DT_VERNEEDNUM) ?? 0, source.size / codec.sizeOf(VERNEED));
  let at = fileOffsetOf(programHeaders, address, codec.sizeOf(VERNEED), 'version needs (DT_VERNEED)');
  const records = new RecordReader(source, codec);
  for (let i = 0; i < count; i++) {
    const need = await records.read(VERNEED, at);
    out.push({ index: need.vn_file, source: 'version-need-file', fieldOffset: at + codec.fieldOffset(VERNEED, 'vn_file') });
    let auxAt = at + need.vn_aux;
    for (let j = 0; j < need.vn_cnt; j++) {
      const aux = await records.read(VERNAUX, auxAt);
      out.push({ index: aux.vna_name, source: 'version-need-name', fieldOffset: auxAt + codec.fieldOffset(VERNAUX, 'vna_name') });
      if (aux.vna_next === 0) break;
      auxAt += aux.vna_next;
    }
    if (need.vn_next === 0) break;
    at += need.vn_next;
  }
}

async function versionDefinitionReferences(image: ElfImage, out: StringReference[]): Promise<void> {
  const dynamic = image.dynamic;
  if (dynamic === null) return;
  const address = dynamicValue(dynamic, DT.DT_VERDEF);
  if (address === undefined) return;
  const { source, codec, programHeaders } = image;
  const count = Math.min(dynamicValue(dynamic, DT.DT_VERDEFNUM) ?? 0, source.size / codec.sizeOf(VERDEF));
  let at = fileOffsetOf(programHeaders, address, codec.sizeOf(VERDEF), 'version definitions (DT_VERDEF)');
  const records = new RecordReader(source, codec);
  for (let i = 0; i < count; i++) {
    const definition = await records.read(VERDEF, at);
    let auxAt = at + definition.vd_aux;
    for (let j = 0; j < definition.vd_cnt; j++) {
      const aux = await records.read(VERDAUX, auxAt);
      out.push({ index: aux.vda_name, source: 'version-definition', fieldOffset: auxAt + codec.fieldOffset(VERDAUX, 'vda_name') });
      if (aux.vda_next === 0) break;
      auxAt += aux.vda_next;
    }
    if (definition.vd_next === 0) break;
    at += definition.vd_next;
  }
}
