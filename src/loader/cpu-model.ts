// The CPU facts the loader acts on: the glibc-hwcaps subdirectories it searches (x86-64-v2…v4), the
// legacy hwcap names and platform of glibc before 2.37 (tls/, x86_64/, haswell/, atomics/), $PLATFORM,
// and the bits ld.so.cache entries are checked against. On this machine's architecture they come
// from a loader of this machine (`ld.so --help`, cpuModelOfLoader): it asks the CPU with cpuid, where
// /proc/cpuinfo may leave a flag out. The table here is for another machine's CPU (a --root of another
// architecture), which is assumed, and for what a loader does not list.

import { readFileSync } from 'node:fs';
import { asciiByteString, type ByteString, concatByteStrings, EMPTY_BYTE_STRING, joinByteStrings } from '../elf/elf.js';
import type { LoaderCpuView } from './loader-help.js';
import type { MachineAbi } from './machine-abi.js';

/** The names are byte strings: directory names, as the loader's own help prints them. */
export interface CpuModel {
  /** $PLATFORM (GLRO(dl_platform)). */
  readonly platform: ByteString;
  /** glibc-hwcaps subdirectories this CPU can use, best first (x86-64-v4, v3, v2). */
  readonly glibcHwcaps: readonly ByteString[];
  /** Legacy hwcap subdirectory names in glibc's order: hwcap names by bit, then the platform, then tls. */
  readonly legacyNames: readonly ByteString[];
  /** Legacy hwcap bits the loader accepts in a cache entry (hwcaps it has, platform bits, the TLS bit). */
  readonly acceptedHwcapBits: bigint;
  readonly platformMask: bigint;
  readonly platformBit: bigint | null;
  /** x86 ISA levels (bit n: level n; bit 0 the baseline) for glibc-hwcaps cache entries. */
  readonly isaLevels: number;
  /** Where the facts come from, for the report: a loader of this machine, or assumed (the table). */
  readonly source: 'this machine' | 'assumed';
}

const TLS_BIT = 1n << 63n;
const TLS = asciiByteString('tls');
const SLASH = asciiByteString('/');
/** sysdeps/x86/dl-procinfo: platform bits start at 48, in the order i586, i686, haswell, xeon_phi. */
const X86_PLATFORMS = ['i586', 'i686', 'haswell', 'xeon_phi'];
const X86_PLATFORM_MASK = 0xfn << 48n;
const HWCAP_X86_64 = 1n << 1n;
const HWCAP_X86_AVX512_1 = 1n << 2n;
const HWCAP_AARCH64_ATOMICS = 1n << 8n;
/** The legacy hwcap names a loader lists, and their bits (glibc's dl-procinfo name tables). */
const LEGACY_HWCAP_BITS: ReadonlyMap<string, bigint> = new Map([
  ['sse2', 1n << 0n],
  ['x86_64', HWCAP_X86_64],
  ['avx512_1', HWCAP_X86_AVX512_1],
  ['atomics', HWCAP_AARCH64_ATOMICS],
]);

/** The features each x86-64 level adds (sysdeps/x86/get-isa-level.h), as /proc/cpuinfo names them. */
const X86_LEVELS: readonly { readonly name: string; readonly flags: readonly string[] }[] = [
  { name: 'x86-64-v2', flags: ['cx16', 'lahf_lm', 'popcnt', 'pni', 'sse4_1', 'sse4_2', 'ssse3'] },
  { name: 'x86-64-v3', flags: ['avx', 'avx2', 'bmi1', 'bmi2', 'f16c', 'fma', 'abm', 'movbe', 'xsave'] },
  { name: 'x86-64-v4', flags: ['avx512f', 'avx512bw', 'avx512cd', 'avx512dq', 'avx512vl'] },
];

export interface CpuInfo {
  readonly vendor: string;
  /** x86 "flags" or aarch64 "Features" of the first processor. */
  readonly flags: ReadonlySet<string>;
}

/** The first processor's vendor and feature flags from /proc/cpuinfo, or null when it cannot be read. */
export function readCpuInfo(path = '/proc/cpuinfo'): CpuInfo | null {
  let text: string;
  try {
    text = readFileSync(path, 'latin1');
  } catch {
    return null;
  }
  const field = (name: string): string => new RegExp(`^${name}\\s*:\\s*(.*)$`, 'm').exec(text)?.[1] ?? '';
  return { vendor: field('vendor_id'), flags: new Set((field('flags') || field('Features')).split(/\s+/).filter(Boolean)) };
}

function x86Model(abi: MachineAbi, cpu: CpuInfo): CpuModel {
  const has = (...flags: string[]): boolean => flags.every((flag) => cpu.flags.has(flag));
  const levels: ByteString[] = [];
  for (const level of X86_LEVELS) {
    if (!has(...level.flags)) break;
    levels.push(asciiByteString(level.name));
  }
  // Intel CPUs get a platform of their own and the avx512_1 hwcap (sysdeps/x86/cpu-features.c).
  let platform = abi.platform;
  let hwcaps = HWCAP_X86_64;
  if (cpu.vendor === 'GenuineIntel') {
    let intelPlatform: string | null = null;
    if (has('avx512cd')) {
      if (has('avx512er')) {
        if (has('avx512pf')) intelPlatform = 'xeon_phi';
      } else if (has('avx512bw', 'avx512dq', 'avx512vl')) hwcaps |= HWCAP_X86_AVX512_1;
    }
    if (intelPlatform === null && has('avx2', 'fma', 'bmi1', 'bmi2', 'abm', 'movbe', 'popcnt')) intelPlatform = 'haswell';
    if (intelPlatform !== null) platform = asciiByteString(intelPlatform);
  }
  const platformIndex = X86_PLATFORMS.indexOf(platform);
  return {
    platform,
    glibcHwcaps: [...levels].reverse(),
    legacyNames: [
      ...((hwcaps & HWCAP_X86_64) !== 0n ? [asciiByteString('x86_64')] : []),
      ...((hwcaps & HWCAP_X86_AVX512_1) !== 0n ? [asciiByteString('avx512_1')] : []),
      platform,
      TLS,
    ],
    acceptedHwcapBits: hwcaps | X86_PLATFORM_MASK | TLS_BIT,
    platformMask: X86_PLATFORM_MASK,
    platformBit: platformIndex < 0 ? null : 1n << BigInt(48 + platformIndex),
    isaLevels: (1 << (levels.length + 1)) - 1,
    source: 'this machine',
  };
}

/**
 * The table's CPU model. On this machine's architecture it is this CPU as /proc/cpuinfo lists it (what
 * a loader of this machine does not say); for another architecture it is assumed: an aarch64 CPU with
 * LSE atomics (every Jetson since Xavier, and qemu), and an x86-64 CPU at the baseline level.
 */
export function cpuModel(abi: MachineAbi, native: boolean, cpu: CpuInfo | null): CpuModel {
  if (abi.name === 'x86_64' && native && cpu !== null) return x86Model(abi, cpu);
  const atomics = abi.name === 'aarch64' && (!native || cpu === null || cpu.flags.has('atomics'));
  const hwcaps = atomics ? HWCAP_AARCH64_ATOMICS : abi.name === 'x86_64' ? HWCAP_X86_64 : 0n;
  const names = (atomics ? ['atomics'] : abi.name === 'x86_64' ? ['x86_64'] : []).map(asciiByteString);
  const x86 = abi.name !== 'aarch64';
  return {
    platform: abi.platform,
    glibcHwcaps: [],
    legacyNames: [...names, abi.platform, TLS],
    acceptedHwcapBits: hwcaps | (x86 ? X86_PLATFORM_MASK : 0n) | TLS_BIT,
    platformMask: x86 ? X86_PLATFORM_MASK : 0n,
    platformBit: x86 && X86_PLATFORMS.includes(abi.platform) ? 1n << BigInt(48 + X86_PLATFORMS.indexOf(abi.platform)) : null,
    isaLevels: 1,
    source: native && cpu !== null ? 'this machine' : 'assumed',
  };
}

/**
 * The CPU model of this machine as a loader running here lists it (`ld.so --help`): the glibc-hwcaps
 * subdirectories it searches, in its order, and the x86 ISA levels it found supported (for cache
 * entries); where it lists them (glibc before 2.37), the legacy hwcap names it searches and its
 * platform. What it does not list comes from `table`.
 */
export function cpuModelOfLoader(abi: MachineAbi, view: LoaderCpuView, table: CpuModel): CpuModel {
  const x86 = abi.name !== 'aarch64';
  let isaLevels = table.isaLevels;
  if (abi.name === 'x86_64') {
    // Bit 0 the baseline, bit n-1 x86-64-vn (GNU_PROPERTY_X86_ISA_1_*): what the loader checks a cache entry's level against.
    isaLevels = 1;
    for (const { name, supported } of view.glibcHwcaps) {
      const level = /^x86-64-v(\d)$/.exec(name);
      if (supported && level !== null) isaLevels |= 1 << (Number(level[1]) - 1);
    }
  }
  const glibcHwcaps = view.glibcHwcaps.filter((subdirectory) => subdirectory.searched).map((subdirectory) => subdirectory.name);
  if (view.legacy === null) return { ...table, glibcHwcaps, isaLevels, source: 'this machine' };
  const platform = view.legacy.platform ?? table.platform;
  // The loader prints the hwcaps highest bit first; it searches them lowest bit first.
  const hwcapNames = [...view.legacy.searchedHwcaps].reverse();
  const hwcaps = hwcapNames.reduce((bits, name) => bits | (LEGACY_HWCAP_BITS.get(name) ?? 0n), 0n);
  const platformIndex = X86_PLATFORMS.indexOf(platform);
  return {
    platform,
    glibcHwcaps,
    legacyNames: [...hwcapNames, platform, TLS],
    acceptedHwcapBits: hwcaps | (x86 ? X86_PLATFORM_MASK : 0n) | TLS_BIT,
    platformMask: x86 ? X86_PLATFORM_MASK : 0n,
    platformBit: x86 && platformIndex >= 0 ? 1n << BigInt(48 + platformIndex) : null,
    isaLevels,
    source: 'this machine',
  };
}

/**
 * The legacy hwcap subdirectories glibc before 2.37 tries in each directory, best first: every
 * combination of the names, the last name outermost (tls/x86_64/x86_64, tls/x86_64, …, x86_64, '').
 */
export function legacySubdirectories(names: readonly ByteString[]): ByteString[] {
  const result: ByteString[] = [];
  for (let mask = (1 << names.length) - 1; mask >= 0; mask--) {
    const parts: ByteString[] = [];
    for (let bit = names.length - 1; bit >= 0; bit--) {
      const name = names[bit];
      if ((mask & (1 << bit)) !== 0 && name !== undefined) parts.push(name);
    }
    result.push(parts.length === 0 ? EMPTY_BYTE_STRING : concatByteStrings(joinByteStrings(parts, SLASH), SLASH));
  }
  return result;
}
