// The loader's namespace, emulated: the objects loaded so far (link maps, in load order) and
// _dl_map_object's search for a name (glibc elf/dl-load.c): already loaded under that name or soname;
// a name with '/' opened as it is; else DT_RPATH of the loading object and of the objects that loaded
// it, up to the program (only when the loading object has no DT_RUNPATH), LD_LIBRARY_PATH, the loading
// object's own DT_RUNPATH, ld.so.cache, the default directories (DF_1_NODEFLIB skips those two). A
// file found under a new name that is an object already loaded (same device and inode) is that object.

import { lookUpCache } from './ld-cache-lookup.js';
import type { EmulatedLoader, EmulationSettings } from './emulated-loader.js';
import { mappingRefusal, type ObjectFacts, type ObjectFactsCache } from './object-facts.js';
import { verifyCandidate } from './open-verify.js';
import { splitSearchList, substituteTokens, type TokenValues } from './search-path.js';

/** How a loaded object was found. */
export type Rule = 'program' | 'library' | 'interpreter' | 'path' | 'rpath' | 'ld-library-path' | 'runpath' | 'cache' | 'default';

export interface FoundBy {
  readonly rule: Rule;
  /** The object whose DT_RPATH or DT_RUNPATH listed the directory. */
  readonly owner: LinkMap | null;
  /** The directory it was found in, hwcaps subdirectory included, as the loader spelled it. */
  readonly directory: string | null;
}

/** One search list the loader went through for a bare name: its directories, as the loader spelled them (none for the cache). */
export interface SearchedList {
  readonly rule: 'rpath' | 'ld-library-path' | 'runpath' | 'cache' | 'default';
  /** The object whose DT_RPATH or DT_RUNPATH it is. */
  readonly owner: LinkMap | null;
  readonly directories: readonly string[];
}

/** A file the search met and went past: another class or machine, or a cache entry it could not use. */
export interface PassedOver {
  readonly path: string;
  readonly reason: string;
}

export class LinkMap {
  /** The name it was first asked for by (a DT_NEEDED string, a dlopen argument, the program's path). */
  readonly name: string;
  /** l_name: the path the loader opened, as it built it (not normalized: $ORIGIN/../lib stays so). */
  readonly path: string;
  readonly facts: ObjectFacts;
  /** $ORIGIN: the directory of `path` (of the real path for a program started by the kernel). */
  readonly origin: string | null;
  /** l_loader: the object whose DT_NEEDED loaded it; null for the program and for dlopen'ed objects. */
  readonly loader: LinkMap | null;
  readonly foundBy: FoundBy;
  /** Breadth-first distance from the program. */
  readonly depth: number;
  /** Whether another name's file can be matched to it by device and inode (not the program: the kernel mapped it). */
  readonly matchesFileId: boolean;

  constructor(init: {
    name: string;
    path: string;
    facts: ObjectFacts;
    origin: string | null;
    loader: LinkMap | null;
    foundBy: FoundBy;
    depth: number;
    matchesFileId: boolean;
  }) {
    this.name = init.name;
    this.path = init.path;
    this.facts = init.facts;
    this.origin = init.origin;
    this.loader = init.loader;
    this.foundBy = init.foundBy;
    this.depth = init.depth;
    this.matchesFileId = init.matchesFileId;
  }
}

/** The values of $PLATFORM and $LIB: the loader's, the same for every object it loads. */
type LoaderTokens = Omit<TokenValues, 'origin'>;

function loaderTokens(loader: EmulatedLoader): LoaderTokens {
  return { platform: loader.cpu.platform, lib: loader.facts.dstLib };
}

/**
 * The directories of the search lists, each list split once, as the loader does: DT_RPATH and
 * DT_RUNPATH of an object on first use (l_rpath_dirs, l_runpath_dirs), with the object's $ORIGIN;
 * LD_LIBRARY_PATH at start-up, with the program's. They follow from the list, the object and the
 * loader's tokens alone, so a namespace and its forks share them.
 */
class SearchLists {
  private readonly tokens: LoaderTokens;
  private readonly rpaths = new Map<LinkMap, readonly string[]>();
  private readonly runpaths = new Map<LinkMap, readonly string[]>();
  /** LD_LIBRARY_PATH's directories; null when it is not set. */
  readonly ldLibraryPath: readonly string[] | null;

  constructor(tokens: LoaderTokens, main: LinkMap, ldLibraryPath: string | null) {
    this.tokens = tokens;
    this.ldLibraryPath = ldLibraryPath === null ? null : splitSearchList(ldLibraryPath, ':;', { ...tokens, origin: main.origin });
  }

  /** DT_RPATH's directories of `map` (none when it has none). */
  rpath(map: LinkMap): readonly string[] {
    return this.split(this.rpaths, map, map.facts.rpath);
  }

  /** DT_RUNPATH's directories of `map` (none when it has none). */
  runpath(map: LinkMap): readonly string[] {
    return this.split(this.runpaths, map, map.facts.runpath);
  }

  private split(known: Map<LinkMap, readonly string[]>, map: LinkMap, list: string | null): readonly string[] {
    if (list === null) return [];
    let dirs = known.get(map);
    if (dirs === undefined) {
      dirs = splitSearchList(list, ':', { ...this.tokens, origin: map.origin });
      known.set(map, dirs);
    }
    return dirs;
  }
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
  | { readonly kind: 'fatal'; readonly path: string; readonly message: string };

export interface Edge {
  readonly from: LinkMap;
  readonly name: string;
  readonly resolution: Resolution;
  /** Named by the loader's preload file, not by a DT_NEEDED of `from`. */
  readonly preload: boolean;
}

/** glibc's l_origin: the directory part of the opened path, made absolute with the working directory. */
export function originOf(path: string, cwd: string): string {
  const absolute = path.startsWith('/') ? path : `${cwd.endsWith('/') ? cwd : `${cwd}/`}${path}`;
  const slash = absolute.lastIndexOf('/');
  return slash <= 0 ? '/' : absolute.slice(0, slash);
}

type Search =
  | { readonly kind: 'found'; readonly path: string; readonly directory: string | null; readonly facts: ObjectFacts }
  | { readonly kind: 'none' }
  | { readonly kind: 'fatal'; readonly path: string; readonly message: string };

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
  private readonly objects: ObjectFactsCache;
  /** Load order: the program, ld.so, then each object as it was loaded. */
  readonly maps: LinkMap[];
  /** Names each object answers to besides its path (l_libname), grown as other names find it. */
  private readonly names: Map<LinkMap, Set<string>>;
  /**
   * Per directory (with subdirectory): whether it exists, as the loader caches it. Shared with the
   * namespace's forks: the loader keeps a directory's status for the whole process, and a dlopen that
   * fails leaves what it learned.
   */
  private readonly directoryStatus: Map<string, boolean>;
  /** The search lists, split once; shared with the forks (they follow from the lists alone). */
  private readonly searchLists: SearchLists;

  private constructor(
    loader: EmulatedLoader,
    settings: EmulationSettings,
    objects: ObjectFactsCache,
    state: {
      maps: LinkMap[];
      names: Map<LinkMap, Set<string>>;
      directoryStatus: Map<string, boolean>;
      searchLists: SearchLists;
    },
  ) {
    this.loader = loader;
    this.settings = settings;
    this.objects = objects;
    this.maps = state.maps;
    this.names = state.names;
    this.directoryStatus = state.directoryStatus;
    this.searchLists = state.searchLists;
  }

  /** A namespace holding the program (or library) and ld.so, as the loader starts. */
  static start(loader: EmulatedLoader, settings: EmulationSettings, objects: ObjectFactsCache, main: LinkMap): LinkNamespace {
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
    const names = new Map<LinkMap, Set<string>>([
      [main, new Set([main.foundBy.rule === 'program' ? '' : main.name])],
      [rtld, new Set([loader.path])],
    ]);
    const searchLists = new SearchLists(loaderTokens(loader), main, settings.ldLibraryPath);
    return new LinkNamespace(loader, settings, objects, { maps: [main, rtld], names, directoryStatus: new Map(), searchLists });
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
    return new LinkNamespace(this.loader, this.settings, this.objects, {
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
  private alreadyLoaded(name: string): LinkMap | null {
    for (const map of this.maps) {
      const names = this.names.get(map) as Set<string>;
      if ((map.path === name && map.foundBy.rule !== 'program') || names.has(name) || map.facts.soname === name) return map;
    }
    return null;
  }

  /** Whether a directory exists, as the loader caches it; the stat's error code when it does not. */
  private checkDirectory(directory: string): { readonly exists: boolean; readonly code: string | null } {
    const known = this.directoryStatus.get(directory);
    if (known !== undefined) return { exists: known, code: null };
    const found = this.settings.root.lookUp(directory);
    const exists = found.ok && found.stats.isDirectory();
    this.directoryStatus.set(directory, exists);
    return { exists, code: found.ok ? null : found.code };
  }

  /** One candidate path: usable, passed over (logged when it exists), or the end of the load. */
  private async tryCandidate(
    path: string,
    log: SearchLog,
  ): Promise<{ kind: 'found'; facts: ObjectFacts } | { kind: 'next'; errno: string } | { kind: 'fatal'; message: string }> {
    const verdict = await verifyCandidate(this.settings.root, path, this.loader.abi, this.loader.littleEndian);
    if (verdict.kind === 'fatal') return verdict;
    if (verdict.kind === 'passed-over') {
      if (verdict.reason !== null) {
        log.passedOver.push({ path, reason: verdict.reason });
        if (verdict.reason.startsWith('ELFCLASS')) log.wrongClass = true;
      }
      return { kind: 'next', errno: verdict.errno };
    }
    return { kind: 'found', facts: await this.objects.get(verdict.hostPath, verdict.stats) };
  }

  /**
   * open_path: each directory with each hwcaps subdirectory; a directory that exists but fails otherwise than "no such file" ends
   * the list.
   */
  private async searchDirectories(name: string, directories: readonly string[], log: SearchLog): Promise<Search> {
    for (const directory of directories) {
      let hereAny = false;
      let errno = 'ENOENT';
      for (const subdirectory of this.loader.subdirectories) {
        const where = directory + subdirectory;
        // Relative directories are never marked missing: the working directory may change.
        const relative = !directory.startsWith('/');
        if (!relative && this.directoryStatus.get(where) === false) continue;
        const path = where + name;
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

  private async searchCache(name: string, nodeflib: boolean, log: SearchLog): Promise<Search> {
    const { cache } = await this.loader.cache();
    if (cache === null) return { kind: 'none' };
    const cached = lookUpCache(cache, name, this.loader.cacheTarget);
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
  async mapObject(requester: LinkMap | null, name: string, mode: MapMode): Promise<Resolution> {
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
    name: string,
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
    name: string,
    log: SearchLog,
  ): Promise<{ search: Search; rule: Rule; owner: LinkMap | null }> {
    const main = this.main;
    const lists = this.searchLists;
    const inDirectories = (rule: SearchedList['rule'], owner: LinkMap | null, directories: readonly string[]) => ({
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
