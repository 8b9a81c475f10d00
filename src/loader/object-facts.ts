// What the loader reads from a shared object as it maps it: the dynamic entries that steer the search
// (DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME, DF_1_NODEFLIB) and what makes it refuse to map one,
// read once per file and shared by every program that loads it. Where a tag other than DT_NEEDED comes
// twice, the loader keeps the last (elf_get_dynamic_info stores each entry over the one before).

import type { Stats } from 'node:fs';
import {
  type ByteString,
  byteStringToText,
  DF_1,
  DT,
  EI_NIDENT,
  type ElfFile,
  ET,
  type OpenOptions,
  PF_X,
  PT,
  sliceByteString,
  withElfFile,
} from '../elf/elf.js';
import type { HeaderCheck } from './open-verify.js';

export interface ObjectFacts {
  /** dev:ino, how the loader tells a file it has already loaded under another name. */
  readonly fileId: string;
  readonly hostPath: string;
  readonly size: number;
  readonly elfClass: 32 | 64;
  readonly littleEndian: boolean;
  readonly machine: number;
  readonly type: number;
  readonly interpreter: ByteString | null;
  readonly soname: ByteString | null;
  readonly needed: readonly ByteString[];
  /** DT_RPATH as the loader uses it: null when the object also has DT_RUNPATH (glibc then ignores DT_RPATH). */
  readonly rpath: ByteString | null;
  readonly runpath: ByteString | null;
  /** DF_1_NODEFLIB: neither the cache nor the default directories for this object's dependencies. */
  readonly nodeflib: boolean;
  /** DF_1_PIE: a position-independent executable, which the loader maps only as the program. */
  readonly pie: boolean;
  /** DF_1_NOOPEN: dlopen refuses it. */
  readonly noOpen: boolean;
  /** PT_LOAD segments: the loader refuses an object without one. */
  readonly loadSegments: number;
  /** PT_DYNAMIC: none, one with no bytes in the file, or one with some (the loader wants the last). */
  readonly dynamicSegment: 'none' | 'empty' | 'present';
  /** Bytes of executable PT_LOAD segments: a stub library has almost none. */
  readonly codeBytes: number;
  /** What the loader checks of the header before it maps the file (open-verify.ts), kept so that it is read once. */
  readonly header: HeaderCheck;
}

function dynamicSegmentOf(file: ElfFile): ObjectFacts['dynamicSegment'] {
  const segments = file.programHeaders.filter((ph) => ph.p_type === PT.PT_DYNAMIC);
  if (segments.length === 0) return 'none';
  return segments.some((ph) => ph.p_filesz === 0) ? 'empty' : 'present';
}

/**
 * Why the loader refuses to map this object as a dependency or for dlopen, in glibc's words and order
 * (elf/dl-load.c _dl_map_object_from_fd); null when it maps it. The program is the kernel's to map.
 */
export function mappingRefusal(facts: ObjectFacts, dlopen: boolean): string | null {
  if (facts.loadSegments === 0) return 'object file has no loadable segments';
  if (facts.type !== ET.ET_DYN) return 'cannot dynamically load executable';
  if (facts.dynamicSegment !== 'present') return 'object file has no dynamic section';
  if (facts.pie) return 'cannot dynamically load position-independent executable';
  if (facts.noOpen && dlopen) return 'shared object cannot be dlopen()ed';
  return null;
}

function fileIdOf(stats: Stats): string {
  return `${stats.dev}:${stats.ino}`;
}

/**
 * The facts of an open ELF file, read as the loader reads it (a PT_DYNAMIC without bytes is none:
 * ElfFile.open with `emptyDynamic: 'absent'`); `fileId` is the file's dev:ino.
 */
async function readObjectFacts(file: ElfFile, fileId: string): Promise<ObjectFacts> {
  const runpath = await file.lastDynString(DT.DT_RUNPATH);
  const flags1 = file.dynValues(DT.DT_FLAGS_1).at(-1) ?? 0;
  const { e_version, e_machine, e_type, e_phentsize, e_phoff, e_phnum } = file.header;
  // The identification was the first read of the open: this one is served from memory.
  const ident = (await file.bytes(0, EI_NIDENT, 'ELF identification')).slice();
  return {
    fileId,
    hostPath: file.path,
    size: file.stats.size,
    elfClass: file.image.codec.elfClass,
    littleEndian: file.image.codec.littleEndian,
    machine: file.header.e_machine,
    type: file.header.e_type,
    interpreter: file.interpreter,
    soname: await file.lastDynString(DT.DT_SONAME),
    needed: await file.dynStrings(DT.DT_NEEDED),
    rpath: runpath === null ? await file.lastDynString(DT.DT_RPATH) : null,
    runpath,
    nodeflib: (flags1 & DF_1.NODEFLIB) !== 0,
    pie: (flags1 & DF_1.PIE) !== 0,
    noOpen: (flags1 & DF_1.NOOPEN) !== 0,
    loadSegments: file.programHeaders.filter((ph) => ph.p_type === PT.PT_LOAD).length,
    dynamicSegment: dynamicSegmentOf(file),
    codeBytes: file.programHeaders
      .filter((ph) => ph.p_type === PT.PT_LOAD && (ph.p_flags & PF_X) !== 0)
      .reduce((sum, ph) => sum + ph.p_filesz, 0),
    header: { ident, e_version, e_machine, e_type, e_phentsize, e_phoff, e_phnum },
  };
}

/**
 * The facts of a loader that is not on this machine (loader-facts.ts assumes its layout): it answers to
 * its own name alone, and no file of this machine is it.
 */
export function absentLoaderObject(path: ByteString, elfClass: 32 | 64, littleEndian: boolean, machine: number): ObjectFacts {
  return {
    fileId: `absent:${path}`,
    hostPath: byteStringToText(path),
    size: 0,
    elfClass,
    littleEndian,
    machine,
    type: ET.ET_DYN,
    interpreter: null,
    soname: sliceByteString(path, path.lastIndexOf('/') + 1) || null,
    needed: [],
    rpath: null,
    runpath: null,
    nodeflib: false,
    pie: false,
    noOpen: false,
    loadSegments: 0,
    dynamicSegment: 'none',
    codeBytes: 0,
    header: {
      ident: new Uint8Array(EI_NIDENT),
      e_version: 0,
      e_machine: machine,
      e_type: ET.ET_DYN,
      e_phentsize: 0,
      e_phoff: 0,
      e_phnum: 0,
    },
  };
}

/** How the loader reads an object: a PT_DYNAMIC without bytes is none (the loader then refuses it as a library). */
export const AS_THE_LOADER_READS: OpenOptions = { emptyDynamic: 'absent' };

/** What reading a file's facts gave: the facts, or the reader's error (the loader's own checks then say what it is). */
type FactsRead = { readonly facts: ObjectFacts } | { readonly error: unknown };

async function readFactsAt(hostPath: string, id: string): Promise<FactsRead> {
  try {
    return { facts: await withElfFile(hostPath, (file) => readObjectFacts(file, id), AS_THE_LOADER_READS) };
  } catch (error) {
    return { error };
  }
}

/** One read of each file however many programs load it. */
export class ObjectFactsCache {
  private readonly byId = new Map<string, Promise<FactsRead>>();

  private read(hostPath: string, stats: Stats): Promise<FactsRead> {
    const id = fileIdOf(stats);
    let read = this.byId.get(id);
    if (read === undefined) {
      read = readFactsAt(hostPath, id);
      this.byId.set(id, read);
    }
    return read;
  }

  /** The facts of the file at `hostPath` (already stat'ed by the caller), opened only when not read yet. */
  async get(hostPath: string, stats: Stats): Promise<ObjectFacts> {
    const read = await this.read(hostPath, stats);
    if ('error' in read) throw read.error;
    return read.facts;
  }

  /**
   * The facts of the file, or null when the reader cannot read it as an ELF file: the one open that the
   * loader's checks of a candidate (from the facts' header) and its facts share.
   */
  async tryGet(hostPath: string, stats: Stats): Promise<ObjectFacts | null> {
    const read = await this.read(hostPath, stats);
    return 'facts' in read ? read.facts : null;
  }

  /** The facts of a file the caller has open (opened AS_THE_LOADER_READS, or read as successfully), read from it when not read yet. */
  async ofFile(file: ElfFile): Promise<ObjectFacts> {
    const id = fileIdOf(file.stats);
    let read = this.byId.get(id);
    if (read === undefined) {
      read = readObjectFacts(file, id).then(
        (facts) => ({ facts }),
        (error: unknown) => ({ error }),
      );
      this.byId.set(id, read);
    }
    const done = await read;
    if ('error' in done) throw done.error;
    return done.facts;
  }
}
