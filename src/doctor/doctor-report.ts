// The report of one file as plain data with stable field names: what `doctor --json` prints
// (docs/doctor.md describes every field) and what the text output is drawn from.

import { type ByteString, byteStringToText, cudaCompatNoteRecord, type CudaCompatNoteRecord, sliceByteString } from '../elf/elf.js';
import type { DlopenCall } from './cuda-dlopen.js';
import type { FileDiagnosis } from './diagnose.js';
import type { Finding } from './findings.js';
import type { LinkMap, Rule } from '../loader/link-map.js';
import type { Edge, PassedOver, Resolution, SearchedList } from '../loader/link-namespace.js';

const text = byteStringToText;

export interface LoadRecord {
  /** The name it was asked for (DT_NEEDED). */
  readonly name: string;
  /** The path the loader opens, exactly as it builds it. */
  readonly path: string;
  /** The file on this machine (differs from path under --root). */
  readonly file: string;
  readonly rule: Rule;
  /** The object whose RPATH or RUNPATH found it, or null. */
  readonly owner: string | null;
  /** The directory it was found in, hwcaps subdirectory included, or null (cache, path, interpreter). */
  readonly directory: string | null;
  readonly neededBy: string;
  readonly depth: number;
}

/** A search list the loader went through for a name it did not find. */
export interface SearchedRecord {
  readonly rule: SearchedList['rule'];
  /** The object whose DT_RPATH or DT_RUNPATH it is, or null. */
  readonly owner: string | null;
  /** As the loader spelled them, each ending in '/' ('' is the working directory); none for the cache. */
  readonly directories: readonly string[];
}

/** One name the loader looked for (a DT_NEEDED, a preload, a dlopen), and what came of it. */
interface LookupRecord {
  readonly name: string;
  readonly status: 'loaded' | 'already-loaded' | 'same-file' | 'missing' | 'fatal';
  readonly path: string | null;
  /** For a name not found: where the loader looked, in order; empty otherwise. */
  readonly searched: readonly SearchedRecord[];
}

export interface NeededRecord extends LookupRecord {
  readonly from: string;
  /** Named by the loader's preload file (/etc/ld.so.preload), not by a DT_NEEDED. */
  readonly preload: boolean;
  readonly message: string | null;
  readonly passedOver: readonly { readonly path: string; readonly reason: string }[];
}

export interface DlopenRecord extends LookupRecord {
  readonly caller: string;
  readonly reason: string;
  readonly rule: Rule | null;
  readonly owner: string | null;
  /** Dependencies of the opened library that are not found (the dlopen then fails). */
  readonly missing: readonly string[];
  /** A dependency the loader found and could not use, which fails the dlopen; null when none. */
  readonly refused: { readonly name: string; readonly path: string; readonly message: string } | null;
  /** What the dlopen adds to the program, in load order: the library, then its new dependencies. */
  readonly loads: readonly { readonly name: string; readonly path: string }[];
}

export interface LibcudaRecord {
  readonly path: string;
  readonly realPath: string;
  readonly kind: string;
  readonly version: string | null;
  readonly versionSource: string | null;
  /** The library whose dlopen finds it first, or null when something needs it directly. */
  readonly caller: string | null;
  /** Its `.note.cuda.fwd_compatibility` (a compat libcuda's), or why it cannot be read; null without one. */
  readonly compatNote: CudaCompatNoteRecord;
}

export interface FileReport {
  readonly file: string;
  /**
   * The shell wrapper named on the command line that runs this program, and the LD_LIBRARY_PATH the program gets from it; null
   * otherwise.
   */
  readonly wrapper: { readonly file: string; readonly ldLibraryPath: string | null } | null;
  readonly path: string;
  readonly kind: 'program' | 'library';
  readonly machine: string;
  readonly interpreter: { readonly path: string; readonly found: boolean };
  readonly loader: {
    readonly path: string;
    readonly glibc: string | null;
    readonly systemDirs: readonly string[];
    readonly cache: { readonly path: string; readonly format: string | null; readonly entries: number };
    readonly subdirectories: readonly string[];
    readonly platform: string;
    readonly lib: string;
    readonly cpu: string;
    readonly assumed: readonly string[];
  };
  readonly loads: readonly LoadRecord[];
  readonly needed: readonly NeededRecord[];
  readonly dlopen: readonly DlopenRecord[];
  readonly cuda: { readonly uses: boolean; readonly libcuda: LibcudaRecord | null };
  readonly findings: readonly Finding[];
}

function status(resolution: Resolution): NeededRecord['status'] {
  if (resolution.kind === 'loaded') return resolution.how === 'new' ? 'loaded' : resolution.how;
  return resolution.kind;
}

function passedOver(resolution: Resolution): { path: string; reason: string }[] {
  return resolution.kind === 'fatal' ? [] : resolution.passedOver.map((p: PassedOver) => ({ path: text(p.path), reason: p.reason }));
}

function searched(resolution: Resolution): SearchedRecord[] {
  if (resolution.kind !== 'missing') return [];
  return resolution.searched.map((list) => ({
    rule: list.rule,
    owner: list.owner === null ? null : text(list.owner.path),
    directories: list.directories.map(text),
  }));
}

/** Each object once, where its first DT_NEEDED reference puts it: ld.so's breadth-first load order. */
function loadOrder(edges: readonly Edge[]): { map: LinkMap; name: ByteString; neededBy: LinkMap }[] {
  const listed = new Set<LinkMap>();
  const order: { map: LinkMap; name: ByteString; neededBy: LinkMap }[] = [];
  for (const edge of edges) {
    if (edge.resolution.kind !== 'loaded') continue;
    const { map } = edge.resolution;
    // The file itself is not listed again when a library needs it back; ld.so is, where first needed.
    if (listed.has(map) || (map.depth === 0 && map.foundBy.rule !== 'interpreter')) continue;
    listed.add(map);
    order.push({ map, name: edge.name, neededBy: edge.from });
  }
  return order;
}

function loadRecord(map: LinkMap, name: ByteString, neededBy: LinkMap): LoadRecord {
  return {
    name: text(name),
    path: text(map.path),
    file: map.facts.hostPath,
    rule: map.foundBy.rule,
    owner: map.foundBy.owner === null ? null : text(map.foundBy.owner.path),
    directory: map.foundBy.directory === null ? null : text(map.foundBy.directory),
    neededBy: text(neededBy.path),
    depth: map.foundBy.rule === 'interpreter' ? neededBy.depth + 1 : map.depth,
  };
}

/** The dependency that stopped a dlopen's load (the last edge, when it is fatal). */
function refusedDependency(call: DlopenCall): DlopenRecord['refused'] {
  const last = call.dependencies.at(-1);
  return last?.resolution.kind === 'fatal'
    ? { name: text(last.name), path: text(last.resolution.path), message: last.resolution.message }
    : null;
}

function dlopenRecord(call: DlopenCall): DlopenRecord {
  const { resolution } = call;
  const map = resolution.kind === 'loaded' ? resolution.map : null;
  const fresh = resolution.kind === 'loaded' && resolution.how === 'new' ? resolution.map : null;
  return {
    name: text(call.name),
    caller: text(call.caller.path),
    reason: call.reason,
    status: status(resolution),
    path: map === null ? (resolution.kind === 'fatal' ? text(resolution.path) : null) : text(map.path),
    rule: fresh?.foundBy.rule ?? null,
    owner: fresh?.foundBy.owner ? text(fresh.foundBy.owner.path) : null,
    searched: searched(resolution),
    missing: call.dependencies.filter((edge) => edge.resolution.kind === 'missing').map((edge) => text(edge.name)),
    refused: refusedDependency(call),
    loads: call.loads.map((loaded) => ({ name: text(loaded.name), path: text(loaded.path) })),
  };
}

export async function fileReport(diagnosis: FileDiagnosis, wrapper: FileReport['wrapper']): Promise<FileReport> {
  const { emulation, libcuda } = diagnosis;
  const { loader } = emulation;
  const cacheState = await loader.cache();
  const version = loader.facts.glibc;
  return {
    file: emulation.hostPath,
    wrapper,
    path: text(emulation.namespace.main.path),
    kind: emulation.kind,
    machine: emulation.abi.name,
    interpreter: { path: text(emulation.interpreter.path), found: emulation.interpreter.found },
    loader: {
      path: text(loader.path),
      glibc: version === null ? null : `${version.major}.${version.minor}`,
      systemDirs: loader.facts.systemDirs.map(text),
      cache: { path: text(cacheState.path), format: cacheState.cache?.format ?? null, entries: cacheState.cache?.entries.length ?? 0 },
      subdirectories: loader.subdirectories.filter((s) => s !== '').map((s) => text(sliceByteString(s, 0, -1))),
      platform: text(loader.cpu.platform),
      lib: text(loader.facts.dstLib),
      cpu: loader.cpu.source,
      assumed: loader.facts.assumed,
    },
    loads: loadOrder(emulation.edges).map(({ map, name, neededBy }) => loadRecord(map, name, neededBy)),
    needed: emulation.edges.map((edge) => ({
      from: text(edge.from.path),
      name: text(edge.name),
      preload: edge.preload,
      status: status(edge.resolution),
      path:
        edge.resolution.kind === 'loaded'
          ? text(edge.resolution.map.path)
          : edge.resolution.kind === 'fatal'
            ? text(edge.resolution.path)
            : null,
      message: edge.resolution.kind === 'fatal' ? edge.resolution.message : null,
      passedOver: passedOver(edge.resolution),
      searched: searched(edge.resolution),
    })),
    dlopen: diagnosis.dlopens.map(dlopenRecord),
    cuda: {
      uses: diagnosis.usesCuda,
      libcuda:
        libcuda === null
          ? null
          : {
              path: text(libcuda.map.path),
              realPath: text(libcuda.facts.realPath),
              kind: libcuda.facts.kind,
              version: libcuda.facts.version,
              versionSource: libcuda.facts.versionSource,
              caller: libcuda.call === null ? null : text(libcuda.call.caller.path),
              compatNote: cudaCompatNoteRecord(libcuda.facts.compatNote),
            },
    },
    findings: diagnosis.findings,
  };
}
