// What the loader reads from a shared object as it maps it: the dynamic entries that steer the search
// (DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME, DF_1_NODEFLIB) and what makes it refuse to map one,
// read once per file and shared by every program that loads it. Where a tag other than DT_NEEDED comes
// twice, the loader keeps the last (elf_get_dynamic_info stores each entry over the one before).

import type { Stats } from 'node:fs';
import { FileByteSource } from '../elf/byte-source.js';
import { DF_1, DT, ET, PF_X, PT } from '../elf/constants.js';
import { dynamicStringsOf, lastDynamicString, readElfImage, type ElfImage } from '../elf/elf-image.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';

export interface ObjectFacts {
  /** dev:ino, how the loader tells a file it has already loaded under another name. */
  readonly fileId: string;
  readonly hostPath: string;
  readonly size: number;
  readonly elfClass: 32 | 64;
  readonly littleEndian: boolean;
  readonly machine: number;
  readonly type: number;
  readonly interpreter: string | null;
  readonly soname: string | null;
  readonly needed: readonly string[];
  /** DT_RPATH as the loader uses it: null when the object also has DT_RUNPATH (glibc then ignores DT_RPATH). */
  readonly rpath: string | null;
  readonly runpath: string | null;
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
}

function dynamicSegmentOf(image: ElfImage): ObjectFacts['dynamicSegment'] {
  const segments = image.programHeaders.filter((ph) => ph.p_type === PT.PT_DYNAMIC);
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

/** Reads the facts of the file at `hostPath` (already stat'ed by the caller). */
async function readObjectFacts(hostPath: string, stats: Stats): Promise<ObjectFacts> {
  const source = FileByteSource.open(hostPath);
  try {
    const image = await readElfImage(source, { emptyDynamic: 'absent' });
    const runpath = await lastDynamicString(image, DT.DT_RUNPATH);
    const flags1 = image.dynamic?.entries.filter((entry) => entry.d_tag === DT.DT_FLAGS_1).at(-1)?.d_val ?? 0;
    return {
      fileId: fileIdOf(stats),
      hostPath,
      size: source.size,
      elfClass: image.codec.elfClass,
      littleEndian: image.codec.littleEndian,
      machine: image.header.e_machine,
      type: image.header.e_type,
      interpreter: image.interpreter,
      soname: await lastDynamicString(image, DT.DT_SONAME),
      needed: await dynamicStringsOf(image, DT.DT_NEEDED),
      rpath: runpath === null ? await lastDynamicString(image, DT.DT_RPATH) : null,
      runpath,
      nodeflib: (flags1 & DF_1.NODEFLIB) !== 0,
      pie: (flags1 & DF_1.PIE) !== 0,
      noOpen: (flags1 & DF_1.NOOPEN) !== 0,
      loadSegments: image.programHeaders.filter((ph) => ph.p_type === PT.PT_LOAD).length,
      dynamicSegment: dynamicSegmentOf(image),
      codeBytes: image.programHeaders
        .filter((ph) => ph.p_type === PT.PT_LOAD && (ph.p_flags & PF_X) !== 0)
        .reduce((sum, ph) => sum + ph.p_filesz, 0),
    };
  } catch (error) {
    throw error instanceof CudaPatchelfError ? error.withFile(hostPath) : error;
  } finally {
    source.close();
  }
}

/** One read of each file however many programs load it. */
export class ObjectFactsCache {
  private readonly byId = new Map<string, Promise<ObjectFacts>>();

  get(hostPath: string, stats: Stats): Promise<ObjectFacts> {
    const id = fileIdOf(stats);
    let facts = this.byId.get(id);
    if (facts === undefined) {
      facts = readObjectFacts(hostPath, stats);
      this.byId.set(id, facts);
    }
    return facts;
  }
}
