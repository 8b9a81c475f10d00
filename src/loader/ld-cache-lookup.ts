// Which path the loader takes from ld.so.cache for a name: glibc's search_cache (elf/dl-cache.c) step by
// step — binary search in ldconfig's order, then among the entries for the name: the machine's ABI
// flags, glibc-hwcaps entries by subdirectory priority, legacy hwcap and platform bits.

import { type ByteString, EMPTY_BYTE_STRING } from '../elf/elf.js';
import type { LdCache, LdCacheEntry } from './ld-cache.js';

/** What the lookup needs to know about the loader and the CPU it runs on. */
export interface CacheLookupTarget {
  /** _DL_CACHE_DEFAULT_ID: the flags an entry of this ABI carries. */
  readonly defaultFlags: number;
  /** _dl_cache_check_flags: the flags the loader accepts at all. */
  readonly acceptsFlags: (flags: number) => boolean;
  /** Priority of a glibc-hwcaps subdirectory, 1 the best; 0 when this CPU cannot use it. */
  readonly glibcHwcapsPriority: (subdirectory: ByteString) => number;
  /** Whether this CPU has the x86 ISA level ldconfig recorded for an entry (always true elsewhere). */
  readonly isaLevelSupported: (level: number) => boolean;
  /** Legacy hwcap bits the loader accepts: (AT_HWCAP & hwcap_mask) | platform bits | the TLS bit. */
  readonly acceptedHwcapBits: bigint;
  /** The bits of the hwcap field that name a platform (x86: bits 48..51), 0n where there are none. */
  readonly platformMask: bigint;
  /** This CPU's platform bit, or null when its platform has none (x86-64): then no platform entry fits. */
  readonly platformBit: bigint | null;
}

/** glibc's _dl_cache_libcmp: runs of digits compare as numbers, so libfoo.so.10 sorts after libfoo.so.9. */
function cacheNameCompare(a: string, b: string): number {
  let i = 0;
  let j = 0;
  const isDigit = (s: string, k: number): boolean => k < s.length && s.charCodeAt(k) >= 0x30 && s.charCodeAt(k) <= 0x39;
  while (i < a.length) {
    if (isDigit(a, i)) {
      if (!isDigit(b, j)) return 1;
      let left = 0;
      let right = 0;
      while (isDigit(a, i)) left = left * 10 + a.charCodeAt(i++) - 0x30;
      while (isDigit(b, j)) right = right * 10 + b.charCodeAt(j++) - 0x30;
      if (left !== right) return left - right;
    } else if (isDigit(b, j)) {
      return -1;
    } else if (j >= b.length || a.charCodeAt(i) !== b.charCodeAt(j)) {
      return a.charCodeAt(i) - (j < b.length ? b.charCodeAt(j) : 0);
    } else {
      i++;
      j++;
    }
  }
  return j < b.length ? -b.charCodeAt(j) : 0;
}

/** The first of the entries for `name`, found by the loader's binary search, or -1. */
function firstMatch(entries: readonly LdCacheEntry[], name: ByteString): number {
  let left = 0;
  let right = entries.length - 1;
  while (left <= right) {
    const middle = Math.floor((left + right) / 2);
    const order = cacheNameCompare(name, (entries[middle] as LdCacheEntry).key);
    if (order === 0) {
      let first = middle;
      while (first > 0 && cacheNameCompare(name, (entries[first - 1] as LdCacheEntry).key) === 0) first--;
      return first;
    }
    // ldconfig sorts the entries in descending order (elf/cache.c compares them swapped).
    if (order < 0) left = middle + 1;
    else right = middle - 1;
  }
  return -1;
}

/** The path the loader would try for `name` from the cache, or null when the cache has none for this ABI and CPU. */
export function lookUpCache(cache: LdCache, name: ByteString, target: CacheLookupTarget): ByteString | null {
  const entries = cache.entries;
  let best: ByteString | null = null;
  let bestPriority = 0;
  for (let i = firstMatch(entries, name); i >= 0 && i < entries.length; i++) {
    const entry = entries[i] as LdCacheEntry;
    if (cacheNameCompare(name, entry.key) !== 0) break;
    if (!target.acceptsFlags(entry.flags)) continue;
    const named = cache.hasHwcapFields && entry.glibcHwcaps !== null;
    if (cache.hasHwcapFields) {
      if (named && !target.isaLevelSupported(entry.isaLevel)) continue;
      // glibc-hwcaps entries come first; past them, a match found there is the answer.
      if (!named && best !== null) break;
      if (!named && (entry.hwcap & ~target.acceptedHwcapBits) !== 0n) continue;
      const platform = entry.hwcap & target.platformMask;
      if (platform !== 0n && platform !== target.platformBit) continue;
      if (named) {
        const priority = target.glibcHwcapsPriority(entry.glibcHwcaps ?? EMPTY_BYTE_STRING);
        if (priority === 0) continue;
        if (best !== null && priority >= bestPriority) continue;
        bestPriority = priority;
      }
    }
    best = entry.value;
    if (!named && entry.flags === target.defaultFlags) break;
  }
  return best;
}
