// What the loader reads from a shared object before it maps it: the dynamic entries that steer the
// search (DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME, DF_1_NODEFLIB), read once per file and shared by
// every program that loads it.

import type { Stats } from 'node:fs';
import { FileByteSource } from '../elf/byte-source.js';
import { DT, PF_X, PT } from '../elf/constants.js';
import { dynamicStringsOf, dynamicValue, readElfImage } from '../elf/elf-image.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';

const DF_1_NODEFLIB = 0x800;

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
  /** Bytes of executable PT_LOAD segments: a stub library has almost none. */
  readonly codeBytes: number;
}

export function fileIdOf(stats: Stats): string {
  return `${stats.dev}:${stats.ino}`;
}

/** Reads the facts of the file at `hostPath` (already stat'ed by the caller). */
export async function readObjectFacts(hostPath: string, stats: Stats): Promise<ObjectFacts> {
  const source = FileByteSource.open(hostPath);
  try {
    const image = await readElfImage(source);
    const runpath = (await dynamicStringsOf(image, DT.DT_RUNPATH))[0] ?? null;
    const flags1 = image.dynamic === null ? 0 : (dynamicValue(image.dynamic, DT.DT_FLAGS_1) ?? 0);
    return {
      fileId: fileIdOf(stats),
      hostPath,
      size: source.size,
      elfClass: image.codec.elfClass,
      littleEndian: image.codec.littleEndian,
      machine: image.header.e_machine,
      type: image.header.e_type,
      interpreter: image.interpreter,
      soname: (await dynamicStringsOf(image, DT.DT_SONAME))[0] ?? null,
      needed: await dynamicStringsOf(image, DT.DT_NEEDED),
      rpath: runpath === null ? ((await dynamicStringsOf(image, DT.DT_RPATH))[0] ?? null) : null,
      runpath,
      nodeflib: (flags1 & DF_1_NODEFLIB) !== 0,
      codeBytes: image.programHeaders.filter((ph) => ph.p_type === PT.PT_LOAD && (ph.p_flags & PF_X) !== 0).reduce((sum, ph) => sum + ph.p_filesz, 0),
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
