// What a glibc loader was built with, read from its own .rodata: the default directories (the list
// `ld.so --help` prints as the system search path; Debian's has the multiarch directories, Nix's glibc
// only its own lib/), the cache path (Nix's glibc moves it), the value of $LIB, and the glibc release
// (glibc-hwcaps subdirectories came in 2.33, legacy hwcap subdirectories went in 2.37). What cannot be
// found there is assumed from the Debian layout, and the report says which facts were assumed.

import { asciiByteString, type ByteString, bytesToByteString, DT, type ElfFile, SHT } from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { debianSystemDirs, type MachineAbi } from './machine-abi.js';

/** A loader's .rodata is tens of KiB; anything far larger is not a glibc loader's. */
const MAX_RODATA = 4 * 1024 * 1024;

const DEFAULT_CACHE = asciiByteString('/etc/ld.so.cache');
const DEFAULT_PRELOAD = asciiByteString('/etc/ld.so.preload');

export interface GlibcVersion {
  readonly major: number;
  readonly minor: number;
}

export interface LoaderFacts {
  readonly soname: ByteString | null;
  /** The default directories, each ending in '/', in search order. */
  readonly systemDirs: readonly ByteString[];
  /** The cache file the loader reads (/etc/ld.so.cache when the loader does not name one). */
  readonly cachePath: ByteString;
  /** The file of libraries every program preloads (/etc/ld.so.preload when the loader does not name one). */
  readonly preloadPath: ByteString;
  /** What $LIB expands to (DL_DST_LIB), e.g. lib/x86_64-linux-gnu on Debian. */
  readonly dstLib: ByteString;
  readonly glibc: GlibcVersion | null;
  /** Facts not found in the loader and assumed instead ('systemDirs', 'cachePath', 'preloadPath', 'dstLib', 'glibc'). */
  readonly assumed: readonly string[];
}

/** NUL-terminated strings of a byte block, with their offsets; a string cut by the block's end is left out. */
function stringsOf(bytes: Uint8Array): { readonly at: number; readonly text: ByteString }[] {
  const result: { at: number; text: ByteString }[] = [];
  let start = 0;
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] !== 0) continue;
    if (i > start) result.push({ at: start, text: bytesToByteString(bytes.subarray(start, i)) });
    start = i + 1;
  }
  return result;
}

const isDirectory = (text: string): boolean => text.length >= 2 && text.startsWith('/') && text.endsWith('/');

/**
 * The system directories: glibc keeps them as one constant of back-to-back strings ("/lib/x86_64-linux-gnu/\0
 * /usr/lib/x86_64-linux-gnu/\0/lib/\0/usr/lib/"). Of the runs of absolute directory names, the longest
 * one that holds the loader's own directory; string merging can leave a shorter tail of the same run.
 */
function systemDirsIn(strings: readonly { at: number; text: ByteString }[], ownDirectory: ByteString): ByteString[] | null {
  let best: ByteString[] | null = null;
  let run: ByteString[] = [];
  let end = -1;
  const close = (): void => {
    if (run.includes(ownDirectory) && (best === null || run.length > best.length)) best = run;
    run = [];
  };
  for (const { at, text } of strings) {
    if (!isDirectory(text) || at !== end) close();
    if (isDirectory(text)) {
      run.push(text);
      end = at + text.length + 1;
    }
  }
  close();
  return best;
}

/** DL_DST_LIB: the compiler places it after the names of the three tokens it is compared with ("ORIGIN", "PLATFORM", "LIB"). */
function dstLibIn(strings: readonly { text: ByteString }[]): ByteString | null {
  const index = strings.findIndex((s, i) => s.text === 'LIB' && strings[i - 1]?.text === 'PLATFORM');
  const next = strings[index + 1]?.text;
  return index >= 0 && next !== undefined && next.startsWith('lib') ? next : null;
}

async function rodataOf(file: ElfFile): Promise<Uint8Array | null> {
  try {
    const sections = await file.sections();
    const rodata = sections.find((s) => s.name === '.rodata' && s.sh_type === SHT.SHT_PROGBITS);
    if (rodata === undefined || rodata.sh_size > MAX_RODATA) return null;
    return await file.bytes(rodata.sh_offset, rodata.sh_size, 'loader .rodata');
  } catch (error) {
    // A loader without readable section headers is still a loader: its facts are assumed.
    if (!(error instanceof CudaPatchelfError)) throw error;
    return null;
  }
}

/** Every fact assumed from the Debian layout: a loader that is not on this machine. */
export function assumedLoaderFacts(abi: MachineAbi): LoaderFacts {
  return {
    soname: null,
    systemDirs: debianSystemDirs(abi),
    cachePath: DEFAULT_CACHE,
    preloadPath: DEFAULT_PRELOAD,
    dstLib: asciiByteString(abi.multiarch === '' ? 'lib' : `lib/${abi.multiarch}`),
    glibc: null,
    assumed: ['systemDirs', 'cachePath', 'preloadPath', 'dstLib', 'glibc'],
  };
}

/** The facts of a loader file; `ownDirectory` is its real directory as the emulated system names it, ending in '/'. */
export async function readLoaderFacts(file: ElfFile, abi: MachineAbi, ownDirectory: ByteString): Promise<LoaderFacts> {
  const soname = await file.lastDynString(DT.DT_SONAME);
  const rodata = await rodataOf(file);
  const strings = rodata === null ? [] : stringsOf(rodata);
  const assumed: string[] = [];
  const foundDirs = systemDirsIn(strings, ownDirectory);
  if (foundDirs === null) assumed.push('systemDirs');
  const systemDirs = foundDirs ?? debianSystemDirs(abi);
  const cache = strings.find((s) => s.text.startsWith('/') && s.text.endsWith('/ld.so.cache'))?.text;
  if (cache === undefined) assumed.push('cachePath');
  const preload = strings.find((s) => s.text.startsWith('/') && s.text.endsWith('/ld.so.preload'))?.text;
  if (preload === undefined) assumed.push('preloadPath');
  const foundLib = dstLibIn(strings);
  if (foundLib === null) assumed.push('dstLib');
  const dstLib = foundLib ?? asciiByteString(`lib/${abi.multiarch}`);
  const release = strings.map((s) => /release version (\d+)\.(\d+)/.exec(s.text)).find((m) => m !== null);
  if (release === undefined) assumed.push('glibc');
  return {
    soname,
    systemDirs,
    cachePath: cache ?? DEFAULT_CACHE,
    preloadPath: preload ?? DEFAULT_PRELOAD,
    dstLib,
    glibc: release === undefined ? null : { major: Number(release[1]), minor: Number(release[2]) },
    assumed,
  };
}
