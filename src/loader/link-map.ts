// One object of an emulated link namespace (glibc's struct link_map, the fields the search reads): the
// name it was asked for, the path the loader opened, its facts, $ORIGIN, which object loaded it and how
// it was found.

import { asciiByteString, type ByteString, concatByteStrings, sliceByteString } from '../elf/elf.js';
import type { ObjectFacts } from './object-facts.js';

const SLASH = asciiByteString('/');

/** How a loaded object was found. */
export type Rule = 'program' | 'library' | 'interpreter' | 'path' | 'rpath' | 'ld-library-path' | 'runpath' | 'cache' | 'default';

export interface FoundBy {
  readonly rule: Rule;
  /** The object whose DT_RPATH or DT_RUNPATH listed the directory. */
  readonly owner: LinkMap | null;
  /** The directory it was found in, hwcaps subdirectory included, as the loader spelled it. */
  readonly directory: ByteString | null;
}

export class LinkMap {
  /** The name it was first asked for by (a DT_NEEDED string, a dlopen argument, the program's path). */
  readonly name: ByteString;
  /** l_name: the path the loader opened, as it built it (not normalized: $ORIGIN/../lib stays so). */
  readonly path: ByteString;
  readonly facts: ObjectFacts;
  /** $ORIGIN: the directory of `path` (of the real path for a program started by the kernel). */
  readonly origin: ByteString | null;
  /** l_loader: the object whose DT_NEEDED loaded it; null for the program and for dlopen'ed objects. */
  readonly loader: LinkMap | null;
  readonly foundBy: FoundBy;
  /** Breadth-first distance from the program. */
  readonly depth: number;
  /** Whether another name's file can be matched to it by device and inode (not the program: the kernel mapped it). */
  readonly matchesFileId: boolean;

  constructor(init: {
    name: ByteString;
    path: ByteString;
    facts: ObjectFacts;
    origin: ByteString | null;
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

/** glibc's l_origin: the directory part of the opened path, made absolute with the working directory. */
export function originOf(path: ByteString, cwd: ByteString): ByteString {
  const absolute = path.startsWith('/') ? path : cwd.endsWith('/') ? concatByteStrings(cwd, path) : concatByteStrings(cwd, SLASH, path);
  const slash = absolute.lastIndexOf('/');
  return slash <= 0 ? SLASH : sliceByteString(absolute, 0, slash);
}
