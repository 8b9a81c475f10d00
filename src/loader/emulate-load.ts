// One ELF file loaded as the loader would: a program as the kernel starts it (its interpreter, $ORIGIN
// from its real path, as /proc/self/exe gives it), a library as `ld.so --list LIB` or a dlopen by path
// loads it ($ORIGIN from the path as given). The result is the namespace after the breadth-first load
// of every DT_NEEDED.

import { readFileSync } from 'node:fs';
import { type ByteString, bytesToByteString, type ElfFile, splitByteString } from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { EmulatedLoader, LoaderRegistry } from './emulated-loader.js';
import { LinkMap, originOf } from './link-map.js';
import { LinkNamespace, type Edge } from './link-namespace.js';
import { machineAbi, type MachineAbi } from './machine-abi.js';
import type { SystemRoot } from './system-root.js';
import type { ObjectFacts } from './object-facts.js';

export interface InterpreterState {
  /** PT_INTERP, or the machine's loader for a library. */
  readonly path: ByteString;
  /** False when PT_INTERP names no file: the kernel cannot start the program at all. */
  readonly found: boolean;
}

export interface LoadEmulation {
  /** The file on this machine. */
  readonly hostPath: string;
  readonly kind: 'program' | 'library';
  readonly abi: MachineAbi;
  readonly interpreter: InterpreterState;
  readonly loader: EmulatedLoader;
  readonly namespace: LinkNamespace;
  /** Every DT_NEEDED in the order the loader resolved them; a fatal resolution is the last. */
  readonly edges: readonly Edge[];
}

/**
 * The names in the loader's preload file (rtld.c: separated by blanks, tabs, newlines and colons); a
 * missing file is the usual case. A preload the loader cannot find is ignored with a message, not fatal.
 */
function preloadNames(root: SystemRoot, path: ByteString): ByteString[] {
  const found = root.lookUp(path);
  if (!found.ok || !found.stats.isFile()) return [];
  try {
    return splitByteString(bytesToByteString(readFileSync(found.hostPath)), /[: \t\n]/).filter((name) => name !== '');
  } catch {
    return [];
  }
}

async function loaderFor(
  registry: LoaderRegistry,
  facts: ObjectFacts,
  abi: MachineAbi,
): Promise<{ loader: EmulatedLoader; interpreter: InterpreterState }> {
  const named = facts.interpreter;
  if (named !== null) {
    try {
      return { loader: await registry.loaderAt(named, abi, facts.littleEndian), interpreter: { path: named, found: true } };
    } catch (error) {
      if (!(error instanceof CudaPatchelfError) || error.kind !== 'io') throw error;
      // The program cannot start; its libraries are still looked up as the machine's own loader would.
      return { loader: await registry.loaderAt(abi.defaultLoader, abi, facts.littleEndian), interpreter: { path: named, found: false } };
    }
  }
  return {
    loader: await registry.loaderAt(abi.defaultLoader, abi, facts.littleEndian),
    interpreter: { path: abi.defaultLoader, found: true },
  };
}

/**
 * The object a load starts from: a program (it has PT_INTERP) as the kernel maps it, $ORIGIN from its
 * real path; a library as `ld.so --list LIB` or a dlopen by path opens it, $ORIGIN from `path`.
 */
export function startingMap(root: SystemRoot, path: ByteString, facts: ObjectFacts): LinkMap {
  const kind = facts.interpreter === null ? 'library' : 'program';
  const real = kind === 'program' ? root.realPath(path) : path;
  return new LinkMap({
    name: path,
    path,
    facts,
    origin: typeof real === 'string' ? originOf(real, root.cwd) : null,
    loader: null,
    foundBy: { rule: kind, owner: null, directory: null },
    depth: 0,
    // The kernel maps a program, and `ld.so --list` opens a library as the program: the loader
    // records no device and inode for it, so another name of the same file loads it again.
    matchesFileId: false,
  });
}

/**
 * Loads the dynamic ELF file `file` (a file doctor was asked about, open AS_THE_LOADER_READS) in an
 * emulated namespace, with `ldLibraryPath` (a byte string; null: unset) as the process's LD_LIBRARY_PATH.
 */
export async function emulateLoad(file: ElfFile, registry: LoaderRegistry, ldLibraryPath: ByteString | null): Promise<LoadEmulation> {
  const hostPath = file.path;
  const { root } = registry.settings;
  const path = root.pathOf(hostPath);
  if (path === null)
    throw new CudaPatchelfError('usage', `outside --root ${root.hostRoot}: the loader of that system cannot see it`, { file: hostPath });
  const facts = await registry.objects.ofFile(file);
  const abi = machineAbi(facts.machine, facts.elfClass);
  if (abi === null)
    throw new CudaPatchelfError('unsupported', 'doctor emulates the glibc loaders of x86_64, aarch64 and i386 only', { file: hostPath });
  const { loader, interpreter } = await loaderFor(registry, facts, abi);
  const main = startingMap(root, path, facts);
  const kind = main.foundBy.rule === 'program' ? 'program' : 'library';
  const namespace = LinkNamespace.start(loader, { ...registry.settings, ldLibraryPath }, registry.candidates, main);
  const preloads: Edge[] = [];
  for (const name of preloadNames(root, loader.facts.preloadPath)) {
    const resolution = await namespace.mapObject(main, name, 'needed');
    preloads.push({ from: main, name, resolution, preload: true });
  }
  const preloaded = preloads.flatMap((edge) => (edge.resolution.kind === 'loaded' ? [edge.resolution.map] : []));
  const edges = [...preloads, ...(await namespace.loadDependencies(main, preloaded))];
  return { hostPath, kind, abi, interpreter, loader, namespace, edges };
}
