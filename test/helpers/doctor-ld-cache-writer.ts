// Writes ld.so.cache files as ldconfig lays them out (glibc elf/cache.c, sysdeps/generic/dl-cache.h),
// written here from the format's description and independent of doctor's reader: the real loader
// under qemu reads them, so a test can compare doctor's answer with glibc's on any cache it makes.

export interface CacheEntrySpec {
  readonly key: string;
  readonly value: string;
  /** 0x0a03 (aarch64), 0x0303 (x86-64)… */
  readonly flags: number;
  /** A glibc-hwcaps subdirectory (new format only). */
  readonly glibcHwcaps?: string;
  /** Raw legacy hwcap bits (new format only). */
  readonly hwcap?: bigint;
}

export type CacheLayout = 'new' | 'old' | 'old+new';

/** ldconfig's order: descending by _dl_cache_libcmp (digit runs compare as numbers), hwcaps entries first among equals. */
function libcmp(a: string, b: string): number {
  const tokens = (s: string): (string | number)[] => s.match(/\d+|\D/g)?.map((t) => (/^\d/.test(t) ? Number(t) : t)) ?? [];
  const x = tokens(a);
  const y = tokens(b);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const p = x[i];
    const q = y[i];
    if (p === undefined) return q === undefined ? 0 : -1;
    if (q === undefined) return 1;
    if (typeof p === 'number' && typeof q === 'number') {
      if (p !== q) return p - q;
    } else if (typeof p === 'number') return 1;
    else if (typeof q === 'number') return -1;
    else if (p !== q) return p.charCodeAt(0) - q.charCodeAt(0);
  }
  return 0;
}

class Strings {
  readonly chunks: Buffer[] = [];
  private size = 0;
  private readonly at = new Map<string, number>();
  constructor(private readonly base: number) {}
  offset(text: string): number {
    let found = this.at.get(text);
    if (found === undefined) {
      found = this.base + this.size;
      this.at.set(text, found);
      const bytes = Buffer.from(`${text}\0`, 'latin1');
      this.chunks.push(bytes);
      this.size += bytes.length;
    }
    return found;
  }
  get length(): number {
    return this.size;
  }
}

const HWCAP_EXTENSION = 1n << 62n;
const EXTENSION_MAGIC = 0xeaa42174;

function sorted(entries: readonly CacheEntrySpec[]): CacheEntrySpec[] {
  return [...entries].sort((a, b) => libcmp(b.key, a.key) || Number(b.glibcHwcaps !== undefined) - Number(a.glibcHwcaps !== undefined));
}

function newFormat(entries: readonly CacheEntrySpec[], fileOffset: number): Buffer {
  const list = sorted(entries);
  const hwcapsNames = [...new Set(list.flatMap((e) => (e.glibcHwcaps === undefined ? [] : [e.glibcHwcaps])))].sort();
  const headerAndEntries = 48 + 24 * list.length;
  // Entry strings count from the start of this header; the extension's from the start of the file.
  const strings = new Strings(headerAndEntries);
  const records = Buffer.alloc(24 * list.length);
  list.forEach((entry, i) => {
    const hwcap = entry.glibcHwcaps === undefined ? (entry.hwcap ?? 0n) : HWCAP_EXTENSION | BigInt(hwcapsNames.indexOf(entry.glibcHwcaps));
    records.writeInt32LE(entry.flags, i * 24);
    records.writeUInt32LE(strings.offset(entry.key), i * 24 + 4);
    records.writeUInt32LE(strings.offset(entry.value), i * 24 + 8);
    records.writeUInt32LE(0, i * 24 + 12);
    records.writeBigUInt64LE(hwcap, i * 24 + 16);
  });
  const nameOffsets = hwcapsNames.map((name) => strings.offset(name) + fileOffset);
  let extension = Buffer.alloc(0);
  const stringsEnd = headerAndEntries + strings.length;
  const extensionAt = (stringsEnd + 3) & ~3;
  if (hwcapsNames.length > 0) {
    const arrayAt = fileOffset + extensionAt + 8 + 16;
    extension = Buffer.alloc(8 + 16 + 4 * nameOffsets.length);
    extension.writeUInt32LE(EXTENSION_MAGIC, 0);
    extension.writeUInt32LE(1, 4);
    extension.writeUInt32LE(1, 8); // cache_extension_tag_glibc_hwcaps
    extension.writeUInt32LE(0, 12);
    extension.writeUInt32LE(arrayAt, 16);
    extension.writeUInt32LE(4 * nameOffsets.length, 20);
    for (const [i, offset] of nameOffsets.entries()) extension.writeUInt32LE(offset, 24 + 4 * i);
  }
  const header = Buffer.alloc(48);
  header.write('glibc-ld.so.cache1.1', 0, 'latin1');
  header.writeUInt32LE(list.length, 20);
  header.writeUInt32LE(strings.length, 24);
  header.writeUInt8(2, 28); // little-endian
  header.writeUInt32LE(hwcapsNames.length > 0 ? fileOffset + extensionAt : 0, 32);
  const padding = Buffer.alloc(hwcapsNames.length > 0 ? extensionAt - stringsEnd : 0);
  return Buffer.concat([header, records, ...strings.chunks, padding, extension]);
}

function oldFormat(entries: readonly CacheEntrySpec[], newPart: (offset: number) => Buffer | null): Buffer {
  const list = sorted(entries.filter((e) => e.glibcHwcaps === undefined && (e.hwcap ?? 0n) === 0n));
  const entriesEnd = 16 + 12 * list.length;
  const newAt = (entriesEnd + 7) & ~7;
  const appended = newPart(newAt);
  // Old-format strings count from the end of the old entries: with a new part there, after it.
  const strings = new Strings(appended === null ? 0 : newAt - entriesEnd + appended.length);
  const records = Buffer.alloc(12 * list.length);
  list.forEach((entry, i) => {
    records.writeInt32LE(entry.flags, i * 12);
    records.writeUInt32LE(strings.offset(entry.key), i * 12 + 4);
    records.writeUInt32LE(strings.offset(entry.value), i * 12 + 8);
  });
  const header = Buffer.alloc(16);
  header.write('ld.so-1.7.0', 0, 'latin1');
  header.writeUInt32LE(list.length, 12);
  const parts: Buffer[] = [header, records];
  if (appended !== null) parts.push(Buffer.alloc(newAt - entriesEnd), appended);
  return Buffer.concat([...parts, ...strings.chunks]);
}

export function ldCacheBytes(entries: readonly CacheEntrySpec[], layout: CacheLayout): Buffer {
  switch (layout) {
    case 'new':
      return newFormat(entries, 0);
    case 'old':
      return oldFormat(entries, () => null);
    case 'old+new':
      return oldFormat(entries, (offset) => newFormat(entries, offset));
  }
}
