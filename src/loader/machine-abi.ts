// The glibc ABIs doctor emulates: what the loader of each machine checks, where it lives, and the
// Debian multiarch layout assumed when a loader's own facts cannot be read from it.

import { asciiByteString, type ByteString, EM, EM_NAMES, EMPTY_BYTE_STRING, nameOf } from '../elf/elf.js';

export interface MachineAbi {
  /** As people and ldconfig -p name it: x86_64, aarch64, i386. */
  readonly name: string;
  readonly machine: number;
  readonly elfClass: 32 | 64;
  /** _DL_CACHE_DEFAULT_ID (sysdeps/…/dl-cache.h): FLAG_ELF_LIBC6 (3) with the machine's bits. */
  readonly cacheFlags: number;
  /** _dl_cache_check_flags: x86-64 and aarch64 accept their own flags only; i386 also plain FLAG_ELF (1). */
  readonly acceptsCacheFlags: (flags: number) => boolean;
  /** Where programs of this machine name their interpreter (PT_INTERP) on a glibc system. */
  readonly defaultLoader: ByteString;
  /** The Debian multiarch triplet (x86_64-linux-gnu): the default directories and $LIB. */
  readonly multiarch: string;
  /** The kernel's AT_PLATFORM string, glibc's $PLATFORM unless the CPU says otherwise (x86). */
  readonly platform: ByteString;
}

const ABIS: readonly MachineAbi[] = [
  {
    name: 'x86_64',
    machine: EM.EM_X86_64,
    elfClass: 64,
    cacheFlags: 0x0303,
    acceptsCacheFlags: (flags) => flags === 0x0303,
    defaultLoader: asciiByteString('/lib64/ld-linux-x86-64.so.2'),
    multiarch: 'x86_64-linux-gnu',
    platform: asciiByteString('x86_64'),
  },
  {
    name: 'aarch64',
    machine: EM.EM_AARCH64,
    elfClass: 64,
    cacheFlags: 0x0a03,
    acceptsCacheFlags: (flags) => flags === 0x0a03,
    defaultLoader: asciiByteString('/lib/ld-linux-aarch64.so.1'),
    multiarch: 'aarch64-linux-gnu',
    platform: asciiByteString('aarch64'),
  },
  {
    name: 'i386',
    machine: EM.EM_386,
    elfClass: 32,
    cacheFlags: 0x0003,
    acceptsCacheFlags: (flags) => flags === 0x0001 || flags === 0x0003,
    defaultLoader: asciiByteString('/lib/ld-linux.so.2'),
    multiarch: 'i386-linux-gnu',
    platform: asciiByteString('i686'),
  },
];

/** The ABI of an ELF file's machine and class, or null when doctor does not emulate its loader. */
export function machineAbi(machine: number, elfClass: 32 | 64): MachineAbi | null {
  return ABIS.find((abi) => abi.machine === machine && abi.elfClass === elfClass) ?? null;
}

/**
 * The ABI of a machine doctor does not emulate (arm, ppc64, riscv…), for the batch's proof of a runpath,
 * which only reads directories: no cache entry matches it, its loader is not known, its default
 * directories are /lib and /usr/lib.
 */
export function otherAbi(machine: number, elfClass: 32 | 64): MachineAbi {
  return {
    name: nameOf(EM_NAMES, machine),
    machine,
    elfClass,
    cacheFlags: -1,
    acceptsCacheFlags: () => false,
    defaultLoader: EMPTY_BYTE_STRING,
    multiarch: '',
    platform: EMPTY_BYTE_STRING,
  };
}

/** The ABI of the machine doctor runs on (Node's process.arch), or null. */
export function hostAbi(arch: string): MachineAbi | null {
  const name = arch === 'x64' ? 'x86_64' : arch === 'arm64' ? 'aarch64' : arch === 'ia32' ? 'i386' : null;
  return ABIS.find((abi) => abi.name === name) ?? null;
}

/** Debian's default directories (what `ld.so --help` lists as the system search path). */
export function debianSystemDirs(abi: MachineAbi): ByteString[] {
  const multiarch = abi.multiarch === '' ? [] : [`/lib/${abi.multiarch}/`, `/usr/lib/${abi.multiarch}/`];
  return [...multiarch, '/lib/', '/usr/lib/'].map(asciiByteString);
}

/** The loaders of every emulated ABI: a system root has at least one of them. */
export function defaultLoaders(): ByteString[] {
  return ABIS.map((abi) => abi.defaultLoader);
}
