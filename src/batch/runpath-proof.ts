// The proof of a resolved runpath before it is written (docs/auto-patchelf.md, "Proven before it is
// written"): the loader model of src/loader/, the one doctor reports from, emulates each file's lookups
// with the runpath the run is about to write, and every dependency the resolver chose must come from
// the file it chose. The same model tells the runpath order (resolve/runpath-order.ts) which file the
// loader takes for a name from each entry. Everything is read through the registry's caches: a file
// phase 1 read is not opened again, and a directory is listed once per run.

import { statSync } from 'node:fs';
import { type ByteString, byteStringToText, textToByteString } from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { startingMap } from '../loader/emulate-load.js';
import type { EmulatedLoader, LoaderRegistry } from '../loader/emulated-loader.js';
import { LibraryListings } from '../loader/library-listings.js';
import { LinkMap } from '../loader/link-map.js';
import { LinkNamespace, type Resolution } from '../loader/link-namespace.js';
import { machineAbi, otherAbi } from '../loader/machine-abi.js';
import type { ObjectFacts } from '../loader/object-facts.js';
import { loaderTokens } from '../loader/search-lists.js';
import { splitSearchList } from '../loader/search-path.js';
import type { ChosenDependency, DirectoryOracle } from '../resolve/runpath-order.js';
import { sameBytes } from '../loader/same-bytes.js';

/** A library file as the proof tells files apart: by device and inode, and by bytes for two copies of one size. */
export interface LibraryFile {
  readonly fileId: string;
  readonly hostPath: string;
  readonly size: number;
}

/** A dependency the resolver chose a file for, and how the file asks for it (DT_NEEDED, or a dlopen by name). */
export interface ChosenLibrary extends ChosenDependency<LibraryFile> {
  readonly by: 'needed' | 'dlopen';
}

/** The runpath a file will have: DT_RUNPATH's value, or DT_RPATH's when that is the tag it keeps. */
export interface PlannedSearchList {
  readonly runpath: ByteString | null;
  readonly rpath: ByteString | null;
}

/** A chosen dependency the loader would not take from the chosen file: what it takes instead, in words. */
export interface ProofMismatch {
  readonly name: ByteString;
  readonly chosen: string;
  readonly loads: string;
}

/** A search that stops the load is no file; its key matches no other. */
const fatalFile = (path: ByteString): LibraryFile => ({ fileId: `fatal:${path}`, hostPath: byteStringToText(path), size: -1 });

/** The file at a path of this machine, its links followed; null when there is none. */
function libraryFileAt(hostPath: string): LibraryFile | null {
  try {
    const stats = statSync(hostPath);
    return stats.isFile() ? { fileId: `${stats.dev}:${stats.ino}`, hostPath, size: stats.size } : null;
  } catch {
    return null;
  }
}

const fileOfFacts = (facts: ObjectFacts): LibraryFile => ({ fileId: facts.fileId, hostPath: facts.hostPath, size: facts.size });

export class RunpathProver {
  private readonly registry: LoaderRegistry;
  /** --interpreter, as the emulated system names it: the loader of every file of the target; null: each file's own. */
  private readonly interpreter: ByteString | null;
  /** What the proofs learned of directories, shared: the file system does not change during phase 1. */
  private readonly directoryStatus = new Map<ByteString, boolean>();
  /** The library names each directory holds, listed once per run: what the runpath order is told of. */
  readonly listings: LibraryListings;
  private readonly comparisons = new Map<string, Promise<boolean>>();
  /** The chosen files, by path: the same few libraries are chosen for many files. */
  private readonly files = new Map<ByteString, LibraryFile | null>();

  constructor(registry: LoaderRegistry, interpreter: ByteString | null) {
    this.registry = registry;
    this.interpreter = interpreter;
    this.listings = new LibraryListings(registry.candidates);
  }

  /** The library file at `path` (a path of this machine, a byte string), its links followed; null when there is none. */
  libraryFile(path: ByteString): LibraryFile | null {
    let file = this.files.get(path);
    if (file === undefined) {
      file = libraryFileAt(byteStringToText(path));
      this.files.set(path, file);
    }
    return file;
  }

  /** Whether two library files are one library: the same file, or a byte-identical copy. */
  same(a: LibraryFile, b: LibraryFile): Promise<boolean> {
    if (a.fileId === b.fileId) return Promise.resolve(true);
    if (a.size !== b.size || a.size < 0) return Promise.resolve(false);
    const key = a.fileId < b.fileId ? `${a.fileId}|${b.fileId}` : `${b.fileId}|${a.fileId}`;
    let compared = this.comparisons.get(key);
    if (compared === undefined) {
      compared = sameBytes(a.hostPath, b.hostPath, a.size);
      this.comparisons.set(key, compared);
    }
    return compared;
  }

  /**
   * The loader of a file: --interpreter, else its own PT_INTERP, else its machine's usual one; a loader
   * that is not on this machine is assumed (emulated-loader.ts).
   */
  private async loaderOf(facts: ObjectFacts): Promise<EmulatedLoader> {
    const abi = machineAbi(facts.machine, facts.elfClass) ?? otherAbi(facts.machine, facts.elfClass);
    const path = this.interpreter ?? facts.interpreter ?? abi.defaultLoader;
    try {
      return await this.registry.loaderAt(path, abi, facts.littleEndian);
    } catch (error) {
      if (!(error instanceof CudaPatchelfError) || (error.kind !== 'io' && error.kind !== 'format')) throw error;
      return this.registry.assumedLoader(path, abi, facts.littleEndian);
    }
  }

  /** What the proofs of one file need: its loader, and the file as the load starts from it. */
  async fileView(hostPath: string, facts: ObjectFacts): Promise<FileView> {
    const { root } = this.registry.settings;
    const path = root.pathOf(hostPath) ?? textToByteString(hostPath);
    return new FileView(this, this.registry, await this.loaderOf(facts), startingMap(root, path, facts), this.directoryStatus);
  }
}

/** One file's loader and starting object: the runpath order's oracle, and the proof of a runpath. */
export class FileView {
  private readonly prover: RunpathProver;
  private readonly registry: LoaderRegistry;
  private readonly loader: EmulatedLoader;
  private readonly main: LinkMap;
  private readonly directoryStatus: Map<ByteString, boolean>;
  /**
   * A namespace with the file as it is, for what one directory holds (a search of one directory reads no
   * runpath); made when the order first asks (most files' orders need no file of a directory).
   */
  private lookups: LinkNamespace | null = null;
  /** Each entry's directory, split once: the order asks of the same entries for every name. */
  private readonly directories = new Map<ByteString, ByteString | null>();

  constructor(
    prover: RunpathProver,
    registry: LoaderRegistry,
    loader: EmulatedLoader,
    main: LinkMap,
    directoryStatus: Map<ByteString, boolean>,
  ) {
    this.prover = prover;
    this.registry = registry;
    this.loader = loader;
    this.main = main;
    this.directoryStatus = directoryStatus;
  }

  private namespaceFor(main: LinkMap): LinkNamespace {
    const settings = { ...this.registry.settings, ldLibraryPath: null };
    return LinkNamespace.start(this.loader, settings, this.registry.candidates, main, this.directoryStatus);
  }

  /** The directory an entry names, as the loader splits it ($ORIGIN, $LIB, $PLATFORM); null for a relative one. */
  private directoryOf(entry: ByteString): ByteString | null {
    let directory = this.directories.get(entry);
    if (directory === undefined) {
      const [split] = splitSearchList(entry, ':', { ...loaderTokens(this.loader), origin: this.main.origin });
      directory = split === undefined || !split.startsWith('/') ? null : split;
      this.directories.set(entry, directory);
    }
    return directory;
  }

  /** What the runpath order asks of each entry's directory. */
  oracle(): DirectoryOracle<LibraryFile> {
    return {
      holder: async (entry, name) => {
        const directory = this.directoryOf(entry);
        if (directory === null) return null;
        this.lookups ??= this.namespaceFor(this.main);
        const search = await this.lookups.findInDirectory(name, directory);
        return search.kind === 'found' ? fileOfFacts(search.facts) : search.kind === 'fatal' ? fatalFile(search.path) : null;
      },
      mayHold: (entry, name) => {
        const directory = this.directoryOf(entry);
        return directory !== null && this.registry.candidates.mayFind(this.loader.pathsTriedIn(directory), name);
      },
      same: (a, b) => this.prover.same(a, b),
      libraryNames: async (entry) => {
        const directory = this.directoryOf(entry);
        if (directory === null) return [];
        return this.prover.listings.namesIn(directory);
      },
    };
  }

  /**
   * The dependencies of `chosen` the loader would not take from the chosen file once the file has the
   * runpath `list`: its DT_NEEDED entries are mapped in order, as the loader maps them, and each dlopen
   * by name is tried after them. A library of libc's directory (entry null) is the interpreter's to find
   * after the runpath: it only must not come from another file through the runpath.
   */
  async mismatches(list: PlannedSearchList, chosen: readonly ChosenLibrary[]): Promise<ProofMismatch[]> {
    const facts = { ...this.main.facts, runpath: list.runpath, rpath: list.runpath === null ? list.rpath : null };
    const main = new LinkMap({ ...this.main, facts });
    const namespace = this.namespaceFor(main);
    const needed = new Map<ByteString, Resolution>();
    let stopped: Resolution | null = null;
    for (const name of facts.needed) {
      if (stopped !== null) break;
      const resolution = await namespace.mapObject(main, name, 'needed');
      needed.set(name, resolution);
      if (resolution.kind === 'fatal') stopped = resolution;
    }
    const result: ProofMismatch[] = [];
    for (const dependency of chosen) {
      const resolution =
        dependency.by === 'needed'
          ? (needed.get(dependency.name) ?? stopped)
          : await namespace.fork().mapObject(main, dependency.name, 'dlopen');
      const loads = await this.wrongLoad(resolution, dependency);
      if (loads !== null) result.push({ name: dependency.name, chosen: dependency.file.hostPath, loads });
    }
    return result;
  }

  /** What the loader takes instead of the chosen file, in words; null when it takes the chosen one. */
  private async wrongLoad(resolution: Resolution | null, dependency: ChosenLibrary): Promise<string | null> {
    if (resolution === null || resolution.kind === 'fatal') {
      return resolution === null
        ? 'nothing: the load stops before it'
        : `nothing: the load stops at ${byteStringToText(resolution.path)} (${resolution.message})`;
    }
    if (resolution.kind === 'missing') return dependency.entry === null ? null : 'nothing: no entry of the runpath gives it';
    const { map } = resolution;
    if (await this.prover.same(fileOfFacts(map.facts), dependency.file)) return null;
    const directory = map.foundBy.directory;
    const through =
      map.foundBy.rule === 'runpath' || map.foundBy.rule === 'rpath'
        ? `, through ${directory === null ? '' : byteStringToText(directory)}`
        : '';
    return `${byteStringToText(map.path)}${through}`;
  }
}
