// /etc/ld.so.cache in glibc's binary formats, read positionally, never by running ldconfig.
//
// Three layouts exist (glibc sysdeps/generic/dl-cache.h): the new format alone ("glibc-ld.so.cache1.1",
// what ldconfig writes since glibc 2.32); the old libc5 format ("ld.so-1.7.0") alone; and the old format
// with the new one following its entries, 8-byte aligned (what ldconfig wrote from 2.2 to 2.31). When
// both are present the loader uses the new part only. Entry strings are offsets from the start of the
// new header (new format) or from the end of the old entries (old format); the glibc-hwcaps extension
// holds file offsets.

import { type ByteSource, type ByteString, dataViewOf, EMPTY_BYTE_STRING, StringTable } from '../elf/elf.js';
import { malformedInput } from '../errors/cuda-patchelf-error.js';

const NEW_MAGIC = 'glibc-ld.so.cache1.1';
const OLD_MAGIC = 'ld.so-1.7.0';
/** struct cache_file_new: magic, version, nlibs, len_strings, flags, padding, extension_offset, unused. */
const NEW_HEADER_SIZE = 48;
/** struct file_entry_new: flags, key, value, osversion, hwcap. */
const NEW_ENTRY_SIZE = 24;
/** struct cache_file: the 11-byte magic, padding, nlibs. */
const OLD_HEADER_SIZE = 16;
/** struct file_entry: flags, key, value. */
const OLD_ENTRY_SIZE = 12;
/** cache_file_new.flags & 3: 0 unknown (old ldconfig), 1 invalid, 2 little-endian, 3 big-endian. */
const ENDIAN_MASK = 3;
const ENDIAN_LITTLE = 2;
const ENDIAN_BIG = 3;
/** struct cache_extension.magic: (uint32_t) -358342284. */
const EXTENSION_MAGIC = 0xeaa42174;
const EXTENSION_TAG_GLIBC_HWCAPS = 1;
/** hwcap bit 62: the low 32 bits index the glibc-hwcaps extension section (bits 32..41 carry an ISA level). */
const HWCAP_EXTENSION_HIGH_WORD = 1 << 30;
const ISA_LEVEL_MASK = 0x3ff;

export type LdCacheFormat = 'new' | 'old' | 'old+new';

export interface LdCacheEntry {
  /** The soname the loader looks up (a byte string). */
  readonly key: ByteString;
  /** The path the loader opens (a byte string). */
  readonly value: ByteString;
  /** The ABI: FLAG_ELF_LIBC6 (3) with the machine's bits, e.g. 0x0303 for x86-64, 0x0a03 for aarch64. */
  readonly flags: number;
  readonly osVersion: number;
  /** Legacy hwcap bits, or a glibc-hwcaps reference (see glibcHwcaps); 0 in the old format. */
  readonly hwcap: bigint;
  /** The glibc-hwcaps subdirectory the entry was found in (x86-64-v3…), or null. */
  readonly glibcHwcaps: ByteString | null;
  /** The x86 ISA level ldconfig recorded for a glibc-hwcaps entry (0: baseline). */
  readonly isaLevel: number;
}

export interface LdCache {
  readonly format: LdCacheFormat;
  /** Sorted as ldconfig wrote them: the loader binary-searches them. */
  readonly entries: readonly LdCacheEntry[];
  /** Whether entries carry hwcap data (struct file_entry_new): only then does the loader check it. */
  readonly hasHwcapFields: boolean;
}

function ascii(bytes: Uint8Array): string {
  return String.fromCharCode(...bytes);
}

/** Reads a cache file in the byte order of the system it belongs to; a cache ld.so would ignore is an error saying why. */
export async function readLdCache(source: ByteSource, littleEndian: boolean): Promise<LdCache> {
  const head = await source.read(0, Math.min(source.size, NEW_HEADER_SIZE), 'cache header');
  if (head.length >= NEW_MAGIC.length && ascii(head.subarray(0, NEW_MAGIC.length)) === NEW_MAGIC) {
    return readNewFormat(source, 0, 'new', littleEndian);
  }
  if (head.length >= OLD_MAGIC.length && ascii(head.subarray(0, OLD_MAGIC.length)) === OLD_MAGIC) {
    return readOldFormat(source, littleEndian);
  }
  throw malformedInput(`not an ld.so cache (neither "${NEW_MAGIC}" nor "${OLD_MAGIC}" at the start); ld.so ignores it`, 0);
}

/** glibc's own plausibility test: the entry count must fit in the file, or the whole cache is ignored. */
function checkEntriesFit(source: ByteSource, start: number, count: number, entrySize: number, what: string): void {
  if (Math.floor((source.size - start) / entrySize) < count) {
    throw malformedInput(
      `truncated: the ${what} header announces ${count} entries (${count * entrySize} bytes) but the ` +
        `file has ${Math.max(0, source.size - start)} bytes after it; ld.so ignores this cache`,
      start,
    );
  }
}

async function readOldFormat(source: ByteSource, littleEndian: boolean): Promise<LdCache> {
  if (source.size <= OLD_HEADER_SIZE)
    throw malformedInput(`truncated: ${source.size} bytes, no room for the old-format header; ld.so ignores this cache`);
  const count = dataViewOf(await source.read(12, 4, 'old-format entry count')).getUint32(0, littleEndian);
  checkEntriesFit(source, OLD_HEADER_SIZE, count, OLD_ENTRY_SIZE, 'old-format');
  const entriesEnd = OLD_HEADER_SIZE + count * OLD_ENTRY_SIZE;
  const newStart = (entriesEnd + 7) & ~7;
  if (source.size >= newStart + NEW_HEADER_SIZE && ascii(await source.read(newStart, NEW_MAGIC.length, 'new-format magic')) === NEW_MAGIC) {
    return readNewFormat(source, newStart, 'old+new', littleEndian);
  }
  const bytes = await source.read(OLD_HEADER_SIZE, count * OLD_ENTRY_SIZE, 'old-format entries');
  const strings = new StringTable(source, entriesEnd, source.size - entriesEnd, 'cache string table');
  const at = dataViewOf(bytes);
  const entries: LdCacheEntry[] = [];
  for (let i = 0; i < count; i++) {
    const flags = at.getInt32(i * OLD_ENTRY_SIZE, littleEndian);
    const key = await strings.get(at.getUint32(i * OLD_ENTRY_SIZE + 4, littleEndian));
    const value = await strings.get(at.getUint32(i * OLD_ENTRY_SIZE + 8, littleEndian));
    entries.push({ key, value, flags, osVersion: 0, hwcap: 0n, glibcHwcaps: null, isaLevel: 0 });
  }
  return { format: 'old', entries, hasHwcapFields: false };
}

async function readNewFormat(source: ByteSource, start: number, format: LdCacheFormat, littleEndian: boolean): Promise<LdCache> {
  if (source.size - start <= NEW_HEADER_SIZE)
    throw malformedInput(`truncated: no room for the ${NEW_MAGIC} header; ld.so ignores this cache`, start);
  const header = dataViewOf(await source.read(start, NEW_HEADER_SIZE, 'cache header'));
  const endian = header.getUint8(28) & ENDIAN_MASK;
  const flagsByte = header.getUint8(28);
  if (flagsByte !== 0 && endian !== (littleEndian ? ENDIAN_LITTLE : ENDIAN_BIG)) {
    throw malformedInput(
      'written for ' +
        `${endian === ENDIAN_BIG ? 'a big-endian' : endian === ENDIAN_LITTLE ? 'a little-endian' : 'no valid'} ` +
        `byte order, not this system's; ld.so ignores this cache`,
      start + 28,
    );
  }
  const count = header.getUint32(20, littleEndian);
  checkEntriesFit(source, start + NEW_HEADER_SIZE, count, NEW_ENTRY_SIZE, NEW_MAGIC);
  const hwcapsNames = await readGlibcHwcapsNames(source, header.getUint32(32, littleEndian), littleEndian);
  const bytes = dataViewOf(await source.read(start + NEW_HEADER_SIZE, count * NEW_ENTRY_SIZE, 'cache entries'));
  // The loader bounds string offsets by the file size, not by len_strings: so does this reader.
  const strings = new StringTable(source, start, source.size - start, 'cache string table');
  const entries: LdCacheEntry[] = [];
  for (let i = 0; i < count; i++) {
    const at = i * NEW_ENTRY_SIZE;
    const hwcap = bytes.getBigUint64(at + 16, littleEndian);
    const high = Number(hwcap >> 32n);
    const extension = (high & ~ISA_LEVEL_MASK) === HWCAP_EXTENSION_HIGH_WORD;
    entries.push({
      flags: bytes.getInt32(at, littleEndian),
      key: await strings.get(bytes.getUint32(at + 4, littleEndian)),
      value: await strings.get(bytes.getUint32(at + 8, littleEndian)),
      osVersion: bytes.getUint32(at + 12, littleEndian),
      hwcap,
      // An index past the section gets no subdirectory name: the loader gives it priority 0 (unusable).
      glibcHwcaps: extension ? (hwcapsNames[Number(hwcap & 0xffffffffn)] ?? EMPTY_BYTE_STRING) : null,
      isaLevel: extension ? high & ISA_LEVEL_MASK : 0,
    });
  }
  return { format, entries, hasHwcapFields: true };
}

/**
 * The glibc-hwcaps extension section: string offsets (from the start of the file) naming the
 * subdirectories that entries refer to by index. A missing or malformed directory means no named
 * hwcaps, as for the loader (cache_extension_load).
 */
async function readGlibcHwcapsNames(source: ByteSource, extensionOffset: number, littleEndian: boolean): Promise<ByteString[]> {
  if (extensionOffset === 0 || extensionOffset % 4 !== 0 || extensionOffset + 8 > source.size) return [];
  const directory = dataViewOf(await source.read(extensionOffset, 8, 'cache extension directory'));
  if (directory.getUint32(0, littleEndian) !== EXTENSION_MAGIC) return [];
  const sectionCount = directory.getUint32(4, littleEndian);
  if (extensionOffset + 8 + sectionCount * 16 > source.size) return [];
  const sections = dataViewOf(await source.read(extensionOffset + 8, sectionCount * 16, 'cache extension sections'));
  let hwcaps: { offset: number; size: number } | null = null;
  for (let i = 0; i < sectionCount; i++) {
    const offset = sections.getUint32(i * 16 + 8, littleEndian);
    const size = sections.getUint32(i * 16 + 12, littleEndian);
    // One section past the end of the file invalidates the whole directory.
    if (offset + size > source.size) return [];
    if (sections.getUint32(i * 16, littleEndian) === EXTENSION_TAG_GLIBC_HWCAPS) hwcaps = { offset, size };
  }
  if (hwcaps === null || hwcaps.size === 0 || hwcaps.offset % 4 !== 0 || hwcaps.size % 4 !== 0) return [];
  const indices = dataViewOf(await source.read(hwcaps.offset, hwcaps.size, 'glibc-hwcaps extension'));
  const names = new StringTable(source, 0, source.size, 'cache string table');
  const result: ByteString[] = [];
  for (let at = 0; at < hwcaps.size; at += 4) {
    const index = indices.getUint32(at, littleEndian);
    // A name outside the file gets priority 0 from the loader, as an unknown subdirectory does.
    result.push(index < source.size ? await names.get(index) : EMPTY_BYTE_STRING);
  }
  return result;
}
