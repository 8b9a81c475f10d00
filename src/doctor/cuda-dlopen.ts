// The libraries CUDA opens with dlopen, resolved as the loader would for each library that calls
// dlopen: the search uses the caller's own DT_RUNPATH (or the DT_RPATH of the caller and of the objects
// that loaded it, when it has no DT_RUNPATH), never the program's DT_RUNPATH. Who calls is not written
// anywhere, so every object that plausibly does is tried: the CUDA runtime (libcudart), every object
// that needs libcudart or libcuda, every object whose .dynstr holds the name or whose `.note.dlopen`
// lists it, the file asked about when its .rodata names it (the runtime linked statically, nvcc's
// default), libcuda itself for the PTX JIT compiler, and libnvrtc for its versioned builtins. And a
// library's siblings: cuDNN, NCCL and nvshmem dlopen the libraries beside them by name (libcudnn.so.9
// opens libcudnn_graph.so.9…), which no note lists; a library beside an object whose .dynstr or .rodata
// names it is tried from that object.

import { realpathSync } from 'node:fs';
import { basename } from 'node:path';
import { asciiByteString, type ByteString, sliceByteString } from '../elf/elf.js';
import type { LoadEmulation } from '../loader/emulate-load.js';
import type { LinkMap } from '../loader/link-map.js';
import type { ObjectFacts } from '../loader/object-facts.js';
import type { Edge, LinkNamespace, Resolution } from '../loader/link-namespace.js';
import { isGlibcLibrary } from '../loader/glibc-libraries.js';
import type { LibraryListings } from '../loader/library-listings.js';
import type { ObjectStrings } from './object-strings.js';

export const LIBCUDA = 'libcuda.so.1';
/** The fixed names: the driver, NVML, the PTX JIT compiler, the debugger back end. */
export const CUDA_DLOPEN_NAMES: readonly ByteString[] = [
  LIBCUDA,
  'libnvidia-ml.so.1',
  'libnvidia-ptxjitcompiler.so.1',
  'libcudadebugger.so.1',
].map(asciiByteString);
const LIBCUDA_NAME = asciiByteString(LIBCUDA);
const PTX_JIT_COMPILER = asciiByteString('libnvidia-ptxjitcompiler.so.1');

/** Why an object is taken to dlopen a name. */
export type CallerReason =
  | 'cuda-runtime'
  | 'needs-cudart'
  | 'needs-libcuda'
  | 'dynstr'
  | 'note'
  | 'static-runtime'
  | 'driver'
  | 'nvrtc'
  | 'sibling';

export interface DlopenCall {
  readonly name: ByteString;
  readonly caller: LinkMap;
  readonly reason: CallerReason;
  /** The note's priority when a `.note.dlopen` names it (required, recommended, suggested). */
  readonly notePriority: string | null;
  readonly resolution: Resolution;
  /** The dlopen'ed object's own dependencies, resolved after it (empty when it was already loaded). */
  readonly dependencies: readonly Edge[];
  /** What the dlopen adds to the namespace, the named object first. */
  readonly loads: readonly LinkMap[];
}

const isCudart = (soname: ByteString | null): boolean => soname !== null && /^libcudart\.so(\.|$)/.test(soname);
const isNvrtc = (soname: ByteString | null): boolean => soname !== null && /^libnvrtc\.so(\.|$)/.test(soname);

/** libnvrtc.so.12.4.127 loads libnvrtc-builtins.so.12.4: the major and minor of its own file name. */
function nvrtcBuiltinsName(map: LinkMap): ByteString | null {
  let real: string;
  try {
    real = basename(realpathSync(map.facts.hostPath));
  } catch {
    return null;
  }
  const version = /^libnvrtc\.so\.(\d+)\.(\d+)/.exec(real);
  return version === null ? null : asciiByteString(`libnvrtc-builtins.so.${version[1]}.${version[2]}`);
}

interface Candidate {
  readonly name: ByteString;
  readonly caller: LinkMap;
  readonly reason: CallerReason;
  readonly notePriority: string | null;
}

/** `libcudnn_ops.so` of `libcudnn_ops.so.9`: the name without its version, which a library may hold and complete. */
const unversioned = (name: ByteString): ByteString | null => {
  const match = /^(.+\.so)\.\d[\d.]*$/.exec(name);
  // The stem is the name's start, up to the version.
  return match === null ? null : sliceByteString(name, 0, (match[1] ?? name).length);
};

/**
 * Which of `libraries` (names of one directory) the object names in its .dynstr or .rodata, whole or
 * without its version: cuDNN holds `libcudnn_ops.so` and adds `.9`, so of a name held without its
 * version, the library named with the major version alone is the one opened.
 */
export async function librariesNamed(
  facts: ObjectFacts,
  libraries: ReadonlySet<ByteString>,
  strings: ObjectStrings,
): Promise<ByteString[]> {
  const stems = new Map<ByteString, ByteString[]>();
  for (const name of libraries) {
    const stem = unversioned(name);
    if (stem !== null && /^.+\.so\.\d+$/.test(name)) stems.set(stem, [...(stems.get(stem) ?? []), name]);
  }
  const held = await strings.namesHeld(facts, new Set([...libraries, ...stems.keys()]));
  return [...new Set([...held].flatMap((name) => stems.get(name) ?? (libraries.has(name) ? [name] : [])))].sort();
}

/**
 * The siblings `map` dlopens by name: the libraries beside it (in its $ORIGIN) it names
 * (librariesNamed), but one `namespace` has loaded already (the dlopen would only find it again).
 * glibc's libraries dlopen theirs (libnss_*, libgcc_s) as the C library's business, not the program's.
 */
async function siblingDlopens(
  map: LinkMap,
  namespace: LinkNamespace,
  strings: ObjectStrings,
  listings: LibraryListings,
): Promise<ByteString[]> {
  const { facts } = map;
  if (map.origin === null || (facts.soname !== null && isGlibcLibrary(facts.soname))) return [];
  const siblings = listings.namesIn(map.origin);
  if (siblings.size === 0) return [];
  const loaded = (name: ByteString): boolean => namespace.maps.some((other) => other.name === name || other.facts.soname === name);
  return (await librariesNamed(facts, siblings, strings)).filter((name) => name !== facts.soname && !loaded(name));
}

/** Every (name, caller) pair to try, callers in load order, each pair once with its strongest reason. */
async function candidates(emulation: LoadEmulation, strings: ObjectStrings, listings: LibraryListings): Promise<Candidate[]> {
  const result: Candidate[] = [];
  const add = (name: ByteString, caller: LinkMap, reason: CallerReason, notePriority: string | null = null): void => {
    if (!result.some((c) => c.name === name && c.caller === caller)) result.push({ name, caller, reason, notePriority });
  };
  const maps = emulation.namespace.maps.filter((map) => map.foundBy.rule !== 'interpreter');
  for (const map of maps) {
    const { facts } = map;
    for (const note of await strings.dlopenEntries(facts)) for (const name of note.sonames) add(name, map, 'note', note.priority);
    const reason: CallerReason | null = isCudart(facts.soname)
      ? 'cuda-runtime'
      : facts.needed.some((n) => isCudart(n))
        ? 'needs-cudart'
        : facts.needed.includes(LIBCUDA_NAME)
          ? 'needs-libcuda'
          : null;
    for (const name of CUDA_DLOPEN_NAMES) {
      // A library's own soname is in its .dynstr: that is not a wish to open itself.
      if (facts.soname === name) continue;
      if (reason !== null) add(name, map, reason);
      else if (await strings.dynstrHas(facts, name)) add(name, map, 'dynstr');
    }
    if (isNvrtc(facts.soname)) {
      const builtins = nvrtcBuiltinsName(map);
      if (builtins !== null) add(builtins, map, 'nvrtc');
    }
    for (const name of await siblingDlopens(map, emulation.namespace, strings, listings)) add(name, map, 'sibling');
  }
  const main = emulation.namespace.main;
  // The driver's own libraries name each other in .rodata; they are not programs with the runtime inside.
  const driverLibrary = main.facts.soname !== null && CUDA_DLOPEN_NAMES.includes(main.facts.soname);
  const staticRuntime = driverLibrary
    ? null
    : await strings.firstInRodata(
        main.facts,
        'libcuda-name',
        { maxLength: LIBCUDA.length, firstByte: (byte) => byte === LIBCUDA.charCodeAt(0) },
        (text) => text === LIBCUDA,
      );
  if (staticRuntime !== null) for (const name of CUDA_DLOPEN_NAMES) add(name, main, 'static-runtime');
  return result;
}

/** One dlopen of `name` from `caller`, on a copy of the namespace (as if it were the first); the copy is returned too. */
async function tryDlopen(namespace: LinkNamespace, candidate: Candidate): Promise<{ call: DlopenCall; trial: LinkNamespace }> {
  const trial = namespace.fork();
  const before = trial.maps.length;
  const resolution = await trial.mapObject(candidate.caller, candidate.name, 'dlopen');
  const dependencies =
    resolution.kind === 'loaded' && resolution.how === 'new' ? await trial.loadDependencies(resolution.map, [], 'dlopen-dependency') : [];
  return { call: { ...candidate, resolution, dependencies, loads: trial.maps.slice(before) }, trial };
}

/**
 * The CUDA dlopens of one loaded file; each libcuda found then opens its PTX JIT compiler from its own
 * namespace, and each library a dlopen brings in opens its own siblings from there (cuDNN's parts open
 * the engines), each (name, caller file) once.
 */
export async function resolveCudaDlopens(
  emulation: LoadEmulation,
  strings: ObjectStrings,
  listings: LibraryListings,
): Promise<DlopenCall[]> {
  const calls: DlopenCall[] = [];
  const drivers = new Set<string>();
  const tried = new Set<string>();
  const queue = (await candidates(emulation, strings, listings)).map((candidate) => ({ candidate, namespace: emulation.namespace }));
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    const { candidate } = next;
    const key = `${candidate.name}\0${candidate.caller.facts.fileId}`;
    if (candidate.reason === 'sibling' && tried.has(key)) continue;
    tried.add(key);
    const { call, trial } = await tryDlopen(next.namespace, candidate);
    calls.push(call);
    for (const map of call.loads)
      for (const name of await siblingDlopens(map, trial, strings, listings))
        queue.push({ candidate: { name, caller: map, reason: 'sibling', notePriority: null }, namespace: trial });
    const { resolution } = call;
    if (candidate.name !== LIBCUDA || resolution.kind !== 'loaded' || drivers.has(resolution.map.facts.fileId)) continue;
    drivers.add(resolution.map.facts.fileId);
    calls.push((await tryDlopen(trial, { name: PTX_JIT_COMPILER, caller: resolution.map, reason: 'driver', notePriority: null })).call);
  }
  return calls;
}
