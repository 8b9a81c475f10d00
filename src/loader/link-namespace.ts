// The loader's namespace, emulated: the objects loaded so far (link maps, in load order) and
// _dl_map_object's search for a name (glibc elf/dl-load.c): already loaded under that name or soname;
// a name with '/' opened as it is; else DT_RPATH of the loading object and of the objects that loaded
// it, up to the program (only when the loading object has no DT_RUNPATH), LD_LIBRARY_PATH, the loading
// object's own DT_RUNPATH, ld.so.cache, the default directories (DF_1_NODEFLIB skips those two). A
// file found under a new name that is an object already loaded (same device and inode) is that object.

import { type ByteString, concatByteStrings, EMPTY_BYTE_STRING } from '../elf/elf.js';
import { type CandidateFiles, isFileName } from './candidate-files.js';
import type { EmulatedLoader, EmulationSettings } from './emulated-loader.js';
import { LinkMap, originOf, type Rule } from './link-map.js';
import { mappingRefusal, type ObjectFacts } from './object-facts.js';
import { loaderTokens, SearchLists } from './search-lists.js';
import { substituteTokens } from './search-path.js';

/** One search list the loader went through for a bare name: its directories, as the loader spelled them (none for the cache). */
export interface SearchedList {
  readonly rule: 'rpath' | 'ld-library-path' | 'runpath' | 'cache' | 'default';
  /** The object whose DT_RPATH or DT_RUNPATH it is. */
  readonly owner: LinkMap | null;
  readonly directories: readonly ByteString[];
}

/** A file the search met and went past: another class or machine, or a cache entry it could not use. */
export interface PassedOver {
  readonly path: ByteString;
  readonly reason: string;
}

export type Resolution =
  | {
      readonly kind: 'loaded';
      readonly map: LinkMap;
      readonly how: 'new' | 'already-loaded' | 'same-file';
      readonly passedOver: readonly PassedOver[];
    }
  /** `searched`: the lists the loader went through, in order (none for a name with a slash). */
  | {
      readonly kind: 'missing';
      readonly wrongClass: boolean;
      readonly passedOver: readonly PassedOver[];
      readonly searched: readonly SearchedList[];
    }
  /** The loader stops here: the program does not start, the dlopen fails. */
  | { readonly kind: 'fatal'; readonly path: ByteString; readonly message: string };

export interface Edge {
  readonly from: LinkMap;
  readonly name: ByteString;
  readonly resolution: Resolution;
  /** Named by the loader's preload file, not by a DT_NEEDED of `from`. */
  readonly preload: boolean;
}

/** What a search of a list, or of one directory, found. */
export type Search =
  | { readonly kind: 'found'; readonly path: ByteString; readonly directory: ByteString | null; readonly facts: ObjectFacts }
  | { readonly kind: 'none' }
  | { readonly kind: 'fatal'; readonly path: ByteString; readonly message: string };

/** What one search for a name has seen so far. */
interface SearchLog {
  readonly passedOver: PassedOver[];
  readonly searched: SearchedList[];
  wrongClass: boolean;
}

/** How an object is asked for: a DT_NEEDED (or preload), a dlopen, or a DT_NEEDED of what a dlopen pulls in. */
export type MapMode = 'needed' | 'dlopen' | 'dlopen-dependency';

export class LinkNamespace {
  readonly loader: EmulatedLoader;
  readonly settings: EmulationSettings;
  private readonly candidates: CandidateFiles;
  /** Load order: the program, ld.so, then each object as it was loaded. */
  readonly maps: LinkMap[];
  /** Names each object answers to besides its path (l_libname), grown as other names find it. */
  private readonly names: Map<LinkMap, Set<ByteString>>;
  /**
   * Per directory (with subdirectory): whether it exists, as the loader caches it. Shared with the
   * namespace's forks: the loader keeps a directory's status for the whole process, and a dlopen that
   * fails leaves what it learned.
   */
  private readonly directoryStatus: Map<ByteString, boolean>;
  /** The search lists, split once; shared with the forks (they follow from the lists alone). */
  private readonly searchLists: SearchLists;

  private constructor(
    loader: EmulatedLoader,
    settings: EmulationSettings,
    candidates: CandidateFiles,
    state: {
      maps: LinkMap[];
      names: Map<LinkMap, Set<ByteString>>;
      directoryStatus: Map<ByteString, boolean>;
      searchLists: SearchLists;
    },
  ) {
    this.loader = loader;
    this.settings = settings;
    this.candidates = candidates;
    this.maps = state.maps;
    this.names = state.names;
    this.directoryStatus = state.directoryStatus;
    this.searchLists = state.searchLists;
  }

  /**
   * A namespace holding the program (or library) and ld.so, as the loader starts. `directoryStatus`: a
   * new process knows no directory yet; a caller that emulates the lookups of many files on a file system
   * that does not change meanwhile (the batch's proof of its runpaths) may share one map between them.
   */
  static start(
    loader: EmulatedLoader,
    settings: EmulationSettings,
    candidates: CandidateFiles,
    main: LinkMap,
    directoryStatus = new Map<ByteString, boolean>(),
  ): LinkNamespace {
    const rtld = new LinkMap({
      name: loader.path,
      path: loader.path,
      facts: loader.object,
      origin: null,
      loader: null,
      foundBy: { rule: 'interpreter', owner: null, directory: null },
      depth: 0,
      matchesFileId: true,
    });
    // The kernel maps a program: its l_name is "", the name it answers to, not its path (ld.so --list
    // opens a library under the path it is given).
    const names = new Map<LinkMap, Set<ByteString>>([
      [main, new Set([main.foundBy.rule === 'program' ? EMPTY_BYTE_STRING : main.name])],
      [rtld, new Set([loader.path])],
    ]);
    const searchLists = new SearchLists(loaderTokens(loader), main, settings.ldLibraryPath);
    return new LinkNamespace(loader, settings, candidates, { maps: [main, rtld], names, directoryStatus, searchLists });
  }

  get main(): LinkMap {
    return this.maps[0] as LinkMap;
  }

  /**
   * A copy to try a dlopen in: the objects it loads and the names they answer to are its own, and this
   * namespace's stay as they were; what it learns of directories is shared (see directoryStatus).
   */
  fork(): LinkNamespace {
    const names = new Map([...this.names].map(([map, set]) => [map, new Set(set)] as const));
    return new LinkNamespace(this.loader, this.settings, this.candidates, {
      maps: [...this.maps],
      names,
      directoryStatus: this.directoryStatus,
      searchLists: this.searchLists,
    });
  }

  /**
   * The already loaded object that answers to `name`, in load order: by path, by a name it was loaded
   * as, or by soname. A query only: glibc adds a soname that matched to the object's names, which
   * spares the next search the comparison and changes no answer.
   */
  private alreadyLoaded(name: ByteString): LinkMap | null {
    for (const map of this.maps) {
      const names = this.names.get(map) as Set<ByteString>;
      if ((map.path === name && map.foundBy.rule !== 'program') || names.has(name) || map.facts.soname === name) return map;
    }
    return null;
  }

  /** Whether a directory exists, as the loader caches it; the stat's error code when it does not. */
  private checkDirectory(directory: ByteString): { readonly exists: boolean; readonly code: string | null } {
    const known = this.directoryStatus.get(directory);
    if (known !== undefined) return { exists: known, code: null };
    const found = this.candidates.lookUp(directory);
    const exists = found.ok && found.stats.isDirectory();
    this.directoryStatus.set(directory, exists);
    return { exists, code: found.ok ? null : found.code };
  }

  /** One candidate path: usable, passed over (logged when it exists), or the end of the load. */
  private async tryCandidate(
    path: ByteString,
    log: SearchLog,
  ): Promise<{ kind: 'found'; facts: ObjectFacts } | { kind: 'next'; errno: string } | { kind: 'fatal'; message: string }> {
    const check = await this.candidates.check(path, this.loader.abi, this.loader.littleEndian);
    if (check.kind === 'next' && check.reason !== null) {
      log.passedOver.push({ path, reason: check.reason });
      if (check.reason.startsWith('ELFCLASS')) log.wrongClass = true;
    }
    return check;
  }

  /**
   * What `requester`'s own search for a bare `name` finds (its lists, LD_LIBRARY_PATH, the cache, the
   * default directories), whatever the namespace has loaded already: what it would get were it the
   * first to ask. Nothing is loaded.
   */
  async wouldFind(requester: LinkMap, name: ByteString): Promise<Search> {
    return (await this.search(requester, name, { passedOver: [], searched: [], wrongClass: false })).search;
  }

  /**
   * What the loader takes for `name` from one directory of a search list (`directory` as the lists spell
   * it, ending in '/'), its hwcaps subdirectories first, as open_path does; nothing is loaded.
   */
  findInDirectory(name: ByteString, directory: ByteString): Promise<Search> {
    return this.searchDirectories(name, [directory], { passedOver: [], searched: [], wrongClass: false });
  }

  /**
   * open_path: each directory with each hwcaps subdirectory; a directory that exists but fails otherwise than "no such file" ends
   * the list.
   */
  private async searchDirectories(name: ByteString, directories: readonly ByteString[], log: SearchLog): Promise<Search> {
    const listed = isFileName(name);
    for (const directory of directories) {
      let hereAny = false;
      let errno = 'ENOENT';
      // Relative directories are never marked missing: the working directory may change.
      const relative = !directory.startsWith('/');
      for (const where of this.loader.pathsTriedIn(directory)) {
        if (!relative && this.directoryStatus.get(where) === false) continue;
        // The open would fail with "no such file" in a directory that exists: what the loader learns
        // then, without a candidate to try (most names of a search are in few of its directories).
        if (listed && !relative && this.candidates.entriesOf(where)?.has(name) === false) {
          this.directoryStatus.set(where, true);
          hereAny = true;
          errno = 'ENOENT';
          continue;
        }
        const path = concatByteStrings(where, name);
        const tried = await this.tryCandidate(path, log);
        if (tried.kind === 'fatal') return { kind: 'fatal', path, message: tried.message };
        if (tried.kind === 'found') {
          if (!relative) this.directoryStatus.set(where, true);
          return { kind: 'found', path, directory: where, facts: tried.facts };
        }
        // errno is the open's, unless the loader's stat of the directory failed after it.
        errno = tried.errno;
        if (relative) hereAny = true;
        else {
          const status = this.checkDirectory(where);
          if (status.code !== null) errno = status.code;
          hereAny ||= status.exists;
        }
      }
      if (hereAny && errno !== 'ENOENT' && errno !== 'EACCES') return { kind: 'none' };
    }
    return { kind: 'none' };
  }

  private async searchCache(name: ByteString, nodeflib: boolean, log: SearchLog): Promise<Search> {
    const cached = await this.loader.cachePath(name);
    if (cached === null) return { kind: 'none' };
    if (nodeflib && this.loader.facts.systemDirs.some((dir) => cached.startsWith(dir))) {
      log.passedOver.push({ path: cached, reason: 'cache entry in a default directory, and DF_1_NODEFLIB is set' });
      return { kind: 'none' };
    }
    const tried = await this.tryCandidate(cached, log);
    if (tried.kind === 'fatal') return { kind: 'fatal', path: cached, message: tried.message };
    if (tried.kind === 'next') {
      if (!log.passedOver.some((p) => p.path === cached))
        log.passedOver.push({ path: cached, reason: `ld.so.cache names it, but it cannot be opened (${tried.errno})` });
      return { kind: 'none' };
    }
    return { kind: 'found', path: cached, directory: null, facts: tried.facts };
  }

  /**
   * _dl_map_object: the object `requester` gets for `name`. `mode`: 'dlopen' for the object dlopen
   * names (`requester` is the caller, and the object gets no l_loader), 'dlopen-dependency' for what
   * that object needs (mapped in dlopen's mode: DF_1_NOOPEN refuses it; its l_loader is its requester).
   */
  async mapObject(requester: LinkMap | null, name: ByteString, mode: MapMode): Promise<Resolution> {
    const dlopen = mode === 'dlopen';
    const known = this.alreadyLoaded(name);
    if (known !== null) return { kind: 'loaded', map: known, how: 'already-loaded', passedOver: [] };
    const log: SearchLog = { passedOver: [], searched: [], wrongClass: false };
    const outcome = name.includes('/') ? await this.openPath(requester, name, log) : await this.search(requester, name, log);
    const result = outcome.search;
    if (result.kind === 'fatal') return result;
    if (result.kind === 'none') return { kind: 'missing', wrongClass: log.wrongClass, passedOver: log.passedOver, searched: log.searched };
    const sameFile = this.maps.find((map) => map.matchesFileId && map.facts.fileId === result.facts.fileId);
    if (sameFile !== undefined) {
      this.names.get(sameFile)?.add(name);
      return { kind: 'loaded', map: sameFile, how: 'same-file', passedOver: log.passedOver };
    }
    const refusal = mappingRefusal(result.facts, mode !== 'needed');
    if (refusal !== null) return { kind: 'fatal', path: result.path, message: refusal };
    const map = new LinkMap({
      name,
      path: result.path,
      facts: result.facts,
      origin: originOf(result.path, this.settings.root.cwd),
      // A dlopen'ed object has no l_loader: its dependencies inherit no DT_RPATH but the program's.
      loader: dlopen ? null : requester,
      foundBy: { rule: outcome.rule, owner: outcome.owner, directory: result.directory },
      depth: dlopen || requester === null ? 1 : requester.depth + 1,
      matchesFileId: true,
    });
    this.maps.push(map);
    this.names.set(map, new Set([name]));
    return { kind: 'loaded', map, how: 'new', passedOver: log.passedOver };
  }

  /** A name with a slash: opened as it is, tokens substituted with the requester's values. */
  private async openPath(
    requester: LinkMap | null,
    name: ByteString,
    log: SearchLog,
  ): Promise<{ search: Search; rule: Rule; owner: LinkMap | null }> {
    const { platform, lib } = loaderTokens(this.loader);
    const path = requester === null ? name : substituteTokens(name, { origin: requester.origin, platform, lib });
    if (path === null || path === '') return { search: { kind: 'none' }, rule: 'path', owner: null };
    const tried = await this.tryCandidate(path, log);
    const search: Search =
      tried.kind === 'found'
        ? { kind: 'found', path, directory: null, facts: tried.facts }
        : tried.kind === 'fatal'
          ? { kind: 'fatal', path, message: tried.message }
          : { kind: 'none' };
    return { search, rule: 'path', owner: null };
  }

  /** The search of a bare name, rule by rule, until one finds it or stops the load. */
  private async search(
    requester: LinkMap | null,
    name: ByteString,
    log: SearchLog,
  ): Promise<{ search: Search; rule: Rule; owner: LinkMap | null }> {
    const main = this.main;
    const lists = this.searchLists;
    const inDirectories = (rule: SearchedList['rule'], owner: LinkMap | null, directories: readonly ByteString[]) => ({
      rule,
      owner,
      directories,
      run: () => this.searchDirectories(name, directories, log),
    });
    const steps: (SearchedList & { run: () => Promise<Search> })[] = [];
    if (requester === null || requester.facts.runpath === null) {
      let mainInChain = false;
      for (let map: LinkMap | null = requester; map !== null; map = map.loader) {
        const dirs = lists.rpath(map);
        if (dirs.length === 0) continue;
        steps.push(inDirectories('rpath', map, dirs));
        mainInChain ||= map === main;
      }
      const mainDirs = lists.rpath(main);
      if (!mainInChain && mainDirs.length > 0) steps.push(inDirectories('rpath', main, mainDirs));
    }
    if (lists.ldLibraryPath !== null) steps.push(inDirectories('ld-library-path', null, lists.ldLibraryPath));
    if (requester !== null && requester.facts.runpath !== null) steps.push(inDirectories('runpath', requester, lists.runpath(requester)));
    const flagsFrom = requester ?? main;
    steps.push({ rule: 'cache', owner: null, directories: [], run: () => this.searchCache(name, flagsFrom.facts.nodeflib, log) });
    if (!flagsFrom.facts.nodeflib) steps.push(inDirectories('default', null, this.loader.facts.systemDirs));
    for (const step of steps) {
      log.searched.push({ rule: step.rule, owner: step.owner, directories: step.directories });
      const search = await step.run();
      if (search.kind !== 'none') return { search, rule: step.rule, owner: step.owner };
    }
    return { search: { kind: 'none' }, rule: 'default', owner: null };
  }

  /**
   * _dl_map_object_deps: breadth first from `start` (and the preloaded objects, which follow it in the
   * queue), each object's DT_NEEDED in order; a fatal error ends it. `mode`: 'dlopen-dependency' for
   * the dependencies of a dlopen'ed object (see mapObject).
   */
  async loadDependencies(start: LinkMap, preloaded: readonly LinkMap[] = [], mode: Exclude<MapMode, 'dlopen'> = 'needed'): Promise<Edge[]> {
    const queue: LinkMap[] = [start, ...preloaded.filter((map) => map !== start)];
    const edges: Edge[] = [];
    const { platform, lib } = loaderTokens(this.loader);
    for (let i = 0; i < queue.length; i++) {
      const map = queue[i] as LinkMap;
      for (const needed of map.facts.needed) {
        // Tokens in DT_NEEDED are substituted before the search (dl-deps.c expand_dst).
        const name = needed.includes('$') ? substituteTokens(needed, { origin: map.origin, platform, lib }) : needed;
        // Only a token that expands to nothing stops the load; an empty name is the program's ("").
        if (name === null || (name === '' && needed !== '')) {
          edges.push({
            from: map,
            name: needed,
            resolution: { kind: 'fatal', path: needed, message: 'empty dynamic string token substitution' },
            preload: false,
          });
          return edges;
        }
        const resolution = await this.mapObject(map, name, mode);
        edges.push({ from: map, name, resolution, preload: false });
        if (resolution.kind === 'fatal') return edges;
        if (resolution.kind === 'loaded' && !queue.includes(resolution.map)) queue.push(resolution.map);
      }
    }
    return edges;
  }
}
