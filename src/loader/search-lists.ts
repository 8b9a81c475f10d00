// The search lists of a namespace as the loader splits them, each once: DT_RPATH and DT_RUNPATH of an
// object on first use, LD_LIBRARY_PATH at start-up, with the loader's $PLATFORM and $LIB.

import type { ByteString } from '../elf/elf.js';
import type { EmulatedLoader } from './emulated-loader.js';
import type { LinkMap } from './link-map.js';
import { splitSearchList, type TokenValues } from './search-path.js';

/** The values of $PLATFORM and $LIB: the loader's, the same for every object it loads. */
export type LoaderTokens = Omit<TokenValues, 'origin'>;

export function loaderTokens(loader: EmulatedLoader): LoaderTokens {
  return { platform: loader.cpu.platform, lib: loader.facts.dstLib };
}

/**
 * The directories of the search lists, each list split once, as the loader does: DT_RPATH and
 * DT_RUNPATH of an object on first use (l_rpath_dirs, l_runpath_dirs), with the object's $ORIGIN;
 * LD_LIBRARY_PATH at start-up, with the program's. They follow from the list, the object and the
 * loader's tokens alone, so a namespace and its forks share them.
 */
export class SearchLists {
  private readonly tokens: LoaderTokens;
  private readonly rpaths = new Map<LinkMap, readonly ByteString[]>();
  private readonly runpaths = new Map<LinkMap, readonly ByteString[]>();
  /** LD_LIBRARY_PATH's directories; null when it is not set. */
  readonly ldLibraryPath: readonly ByteString[] | null;

  constructor(tokens: LoaderTokens, main: LinkMap, ldLibraryPath: ByteString | null) {
    this.tokens = tokens;
    this.ldLibraryPath = ldLibraryPath === null ? null : splitSearchList(ldLibraryPath, ':;', { ...tokens, origin: main.origin });
  }

  /** DT_RPATH's directories of `map` (none when it has none). */
  rpath(map: LinkMap): readonly ByteString[] {
    return this.split(this.rpaths, map, map.facts.rpath);
  }

  /** DT_RUNPATH's directories of `map` (none when it has none). */
  runpath(map: LinkMap): readonly ByteString[] {
    return this.split(this.runpaths, map, map.facts.runpath);
  }

  private split(known: Map<LinkMap, readonly ByteString[]>, map: LinkMap, list: ByteString | null): readonly ByteString[] {
    if (list === null) return [];
    let dirs = known.get(map);
    if (dirs === undefined) {
      dirs = splitSearchList(list, ':', { ...this.tokens, origin: map.origin });
      known.set(map, dirs);
    }
    return dirs;
  }
}
