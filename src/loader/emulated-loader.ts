// One glibc loader as doctor emulates it: found where a program's PT_INTERP names it (inside --root
// when one is given), with the facts read from it, the CPU it runs on (as a loader of this machine
// lists it, for this machine's architecture), the subdirectories it tries in every directory and its
// ld.so.cache.

import {
  asciiByteString,
  type ByteString,
  byteStringToText,
  concatByteStrings,
  EMPTY_BYTE_STRING,
  sliceByteString,
  withElfFile,
  withFileByteSource,
} from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { CandidateFiles } from './candidate-files.js';
import { legacySubdirectories, cpuModel, cpuModelOfLoader, type CpuInfo, type CpuModel } from './cpu-model.js';
import { readLdCache, type LdCache } from './ld-cache.js';
import { type CacheLookupTarget, lookUpCache } from './ld-cache-lookup.js';
import { assumedLoaderFacts, readLoaderFacts, type LoaderFacts } from './loader-facts.js';
import { parseLoaderHelp, runLoaderHelp } from './loader-help.js';
import type { MachineAbi } from './machine-abi.js';
import { absentLoaderObject, type ObjectFactsCache, type ObjectFacts } from './object-facts.js';
import type { SystemRoot } from './system-root.js';

export interface EmulationSettings {
  readonly root: SystemRoot;
  /** LD_LIBRARY_PATH of the emulated process; null when it is not set. */
  readonly ldLibraryPath: ByteString | null;
  /** The ABI of the machine doctor runs on: its CPU is the emulated one for that ABI. */
  readonly hostAbi: MachineAbi | null;
  readonly cpuInfo: CpuInfo | null;
}

export interface CacheState {
  /** The cache file as the loader names it. */
  readonly path: ByteString;
  /** Null when there is no cache file (the loader then goes on without one). */
  readonly cache: LdCache | null;
}

export interface EmulatedLoader {
  readonly abi: MachineAbi;
  readonly littleEndian: boolean;
  /** The loader's path as programs name it (PT_INTERP). */
  readonly path: ByteString;
  /** The loader file as an object of the namespace (ld.so is always loaded, under its soname too). */
  readonly object: ObjectFacts;
  readonly facts: LoaderFacts;
  readonly cpu: CpuModel;
  /** Tried in every directory, best first, ending with '' (the directory itself). */
  readonly subdirectories: readonly ByteString[];
  /**
   * The paths tried in `directory` (a search list's, ending in '/'): it with each of `subdirectories`,
   * in their order; made once per directory and loader, as a search tries them for every name.
   */
  pathsTriedIn(directory: ByteString): readonly ByteString[];
  cache(): Promise<CacheState>;
  /** The path the cache gives this loader for `name` (ld-cache-lookup.ts), or null; looked up once per name. */
  cachePath(name: ByteString): Promise<ByteString | null>;
}

/** glibc-hwcaps subdirectories came with glibc 2.33; legacy hwcap subdirectories went with 2.37 (unknown: the newest behaviour). */
const GLIBC_HWCAPS = asciiByteString('glibc-hwcaps/');
const SLASH = asciiByteString('/');

function subdirectoriesFor(facts: LoaderFacts, cpu: CpuModel): ByteString[] {
  const version = facts.glibc === null ? Infinity : facts.glibc.major * 1000 + facts.glibc.minor;
  const named = version >= 2033 ? cpu.glibcHwcaps.map((name) => concatByteStrings(GLIBC_HWCAPS, name, SLASH)) : [];
  return [...named, ...(version < 2037 ? legacySubdirectories(cpu.legacyNames) : [EMPTY_BYTE_STRING])];
}

function pathsTriedIn(subdirectories: readonly ByteString[]): (directory: ByteString) => readonly ByteString[] {
  const made = new Map<ByteString, readonly ByteString[]>();
  return (directory) => {
    let paths = made.get(directory);
    if (paths === undefined) {
      paths = subdirectories.map((subdirectory) => concatByteStrings(directory, subdirectory));
      made.set(directory, paths);
    }
    return paths;
  };
}

/** A loader's cachePath: each name looked up in the cache once (every file of a run asks for libc's libraries). */
function cachePaths(cache: () => Promise<CacheState>, target: CacheLookupTarget): (name: ByteString) => Promise<ByteString | null> {
  const found = new Map<ByteString, Promise<ByteString | null>>();
  return (name) => {
    let path = found.get(name);
    if (path === undefined) {
      path = cache().then((state) => (state.cache === null ? null : lookUpCache(state.cache, name, target)));
      found.set(name, path);
    }
    return path;
  };
}

function cacheTargetFor(abi: MachineAbi, cpu: CpuModel): CacheLookupTarget {
  return {
    defaultFlags: abi.cacheFlags,
    acceptsFlags: abi.acceptsCacheFlags,
    glibcHwcapsPriority: (name) => cpu.glibcHwcaps.indexOf(name) + 1,
    isaLevelSupported: (level) => abi.name !== 'x86_64' || (cpu.isaLevels & (1 << level)) !== 0,
    acceptedHwcapBits: cpu.acceptedHwcapBits,
    platformMask: cpu.platformMask,
    platformBit: cpu.platformBit,
  };
}

/**
 * The CPU the loader of `abi` runs on. On this machine's architecture, as a loader of this machine
 * lists it (`ld.so --help`): the loader itself, or under --root this machine's own loader of that ABI
 * (doctor runs nothing from the image; its programs would run on this CPU). When none answers, and for
 * another machine's architecture, the table: another machine's CPU is assumed.
 */
function cpuOf(settings: EmulationSettings, abi: MachineAbi, loaderHostPath: string): CpuModel {
  const native = settings.hostAbi?.name === abi.name;
  const table = cpuModel(abi, native, settings.cpuInfo);
  if (!native) return table;
  const help = runLoaderHelp(settings.root.isHost ? loaderHostPath : byteStringToText(abi.defaultLoader));
  const view = help === null ? null : parseLoaderHelp(help);
  return view === null ? { ...table, source: 'assumed' } : cpuModelOfLoader(abi, view, table);
}

/** A file of the emulated system as an error names it: its path on this machine, the root's directory before it. */
function hostFileName(root: SystemRoot, path: ByteString): string {
  return root.isHost ? byteStringToText(path) : `${root.hostRoot}${byteStringToText(path)}`;
}

async function readCacheState(root: SystemRoot, path: ByteString, littleEndian: boolean): Promise<CacheState> {
  const found = root.lookUp(path);
  if (!found.ok && (found.code === 'ENOENT' || found.code === 'ENOTDIR')) return { path, cache: null };
  if (!found.ok)
    throw new CudaPatchelfError('io', `cannot read the loader's cache (${found.code}); doctor cannot tell what ld.so finds through it`, {
      file: hostFileName(root, path),
    });
  return { path, cache: await withFileByteSource(found.hostPath, (source) => readLdCache(source, littleEndian)) };
}

/** The loaders met so far, one per interpreter path: their facts are read once per run. */
export class LoaderRegistry {
  readonly settings: EmulationSettings;
  readonly objects: ObjectFactsCache;
  /** What each path a search tries holds, read once for every namespace of the run. */
  readonly candidates: CandidateFiles;
  private readonly loaders = new Map<string, Promise<EmulatedLoader>>();

  constructor(settings: EmulationSettings, objects: ObjectFactsCache) {
    this.settings = settings;
    this.objects = objects;
    this.candidates = new CandidateFiles(settings.root, objects);
  }

  /** The loader at `path` (a PT_INTERP), for objects of `abi`; an io error when it is not there. */
  loaderAt(path: ByteString, abi: MachineAbi, littleEndian: boolean): Promise<EmulatedLoader> {
    const key = `${abi.name}:${path}`;
    let loader = this.loaders.get(key);
    if (loader === undefined) {
      loader = this.readLoader(path, abi, littleEndian);
      this.loaders.set(key, loader);
    }
    return loader;
  }

  /**
   * A loader of `abi` at `path` that is not on this machine (a tree of another machine without its
   * interpreter at hand): its facts assumed from the Debian layout (loader-facts.ts), the CPU from the
   * table, and no cache: what it would find there is not known here.
   */
  assumedLoader(path: ByteString, abi: MachineAbi, littleEndian: boolean): EmulatedLoader {
    const facts = assumedLoaderFacts(abi);
    const cpu = cpuModel(abi, false, null);
    const subdirectories = subdirectoriesFor(facts, cpu);
    const cacheTarget = cacheTargetFor(abi, cpu);
    const cache = async (): Promise<CacheState> => ({ path: facts.cachePath, cache: null });
    return {
      abi,
      littleEndian,
      path,
      object: absentLoaderObject(path, abi.elfClass, littleEndian, abi.machine),
      facts,
      cpu,
      subdirectories,
      pathsTriedIn: pathsTriedIn(subdirectories),
      cache,
      cachePath: cachePaths(cache, cacheTarget),
    };
  }

  private async readLoader(path: ByteString, abi: MachineAbi, littleEndian: boolean): Promise<EmulatedLoader> {
    const { root } = this.settings;
    const found = root.lookUp(path);
    if (!found.ok) {
      // Files of another machine are looked at in a system root of that machine.
      const hint =
        root.isHost && this.settings.hostAbi?.name !== abi.name ? `: ${abi.name} files need --root with an ${abi.name} system root` : '';
      // Named by the loader, not by the file that needs it: every file of that machine fails the same
      // way, and the command says a line once however many files it fails (doctor-command.ts).
      throw new CudaPatchelfError('io', `no dynamic loader there (${found.code})${hint}`, {
        file: hostFileName(root, path),
      });
    }
    const real = root.realPath(path);
    const ownDirectory =
      typeof real === 'string' ? concatByteStrings(sliceByteString(real, 0, real.lastIndexOf('/')), SLASH) : EMPTY_BYTE_STRING;
    // The loader file is also an object of every namespace: its facts come from the same open. A file
    // that reads as a loader reads the same AS_THE_LOADER_READS (only a PT_DYNAMIC without bytes differs).
    const { facts, object } = await withElfFile(found.hostPath, async (file) => ({
      facts: await readLoaderFacts(file, abi, ownDirectory),
      object: await this.objects.ofFile(file),
    }));
    const cpu = cpuOf(this.settings, abi, found.hostPath);
    let cacheState: Promise<CacheState> | undefined;
    const subdirectories = subdirectoriesFor(facts, cpu);
    const cacheTarget = cacheTargetFor(abi, cpu);
    const cache = (): Promise<CacheState> => (cacheState ??= readCacheState(root, facts.cachePath, littleEndian));
    return {
      abi,
      littleEndian,
      path,
      object,
      facts,
      cpu,
      subdirectories,
      pathsTriedIn: pathsTriedIn(subdirectories),
      cache,
      cachePath: cachePaths(cache, cacheTarget),
    };
  }
}
