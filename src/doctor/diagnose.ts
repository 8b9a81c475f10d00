// One file, start to end: its load emulated, the CUDA dlopens resolved, the libcuda it would use
// described, and what is wrong with all that.

import { readdirSync } from 'node:fs';
import { type ByteString, byteStringToText, dirnameBytePath, type ElfFile } from '../elf/elf.js';
import { CUDA_DLOPEN_NAMES, LIBCUDA, resolveCudaDlopens, type CallerReason, type DlopenCall } from './cuda-dlopen.js';
import type { DriverVersion } from './driver-version.js';
import type { LoaderRegistry } from '../loader/emulated-loader.js';
import { emulateLoad, type LoadEmulation } from '../loader/emulate-load.js';
import {
  dlopenFindings,
  driverPartsFindings,
  libcudaFindings,
  loadFindings,
  mixedInstallationsFinding,
  type Finding,
  type LibcudaChoice,
  type SearchedDirectory,
} from './findings.js';
import { describeLibcuda, driverVersionInName } from './libcuda-facts.js';
import type { LinkMap } from '../loader/link-map.js';
import { LibraryListings } from '../loader/library-listings.js';
import { ObjectStrings } from './object-strings.js';
import { shadowingFindings } from './shadowing.js';
import { stubAdvice } from './stub-advice.js';
import type { SystemRoot } from '../loader/system-root.js';

export interface DoctorContext {
  readonly registry: LoaderRegistry;
  readonly strings: ObjectStrings;
  /** The libraries of each directory asked about, listed once per run. */
  readonly listings: LibraryListings;
  /** The kernel driver's version, or null when neither this machine nor an option tells it. */
  readonly driver: DriverVersion | null;
}

export function doctorContext(registry: LoaderRegistry, driver: DriverVersion | null): DoctorContext {
  return { registry, strings: new ObjectStrings(CUDA_DLOPEN_NAMES), listings: new LibraryListings(registry.candidates), driver };
}

export interface FileDiagnosis {
  readonly emulation: LoadEmulation;
  readonly dlopens: readonly DlopenCall[];
  /** Whether anything in the program loads the CUDA driver. */
  readonly usesCuda: boolean;
  readonly libcuda: LibcudaChoice | null;
  readonly findings: readonly Finding[];
}

/** Which caller's dlopen of libcuda runs first: the CUDA runtime's, dynamic or static, before anyone else's. */
const CALLER_ORDER: readonly CallerReason[] = ['cuda-runtime', 'static-runtime', 'needs-cudart', 'needs-libcuda', 'dynstr', 'note'];

async function chooseLibcuda(
  emulation: LoadEmulation,
  calls: readonly DlopenCall[],
  context: DoctorContext,
): Promise<LibcudaChoice | null> {
  const { root } = context.registry.settings;
  const needed = emulation.namespace.maps.find((map) => map.depth > 0 && (map.name === LIBCUDA || map.facts.soname === LIBCUDA));
  if (needed !== undefined)
    return {
      map: needed,
      facts: await describeLibcuda(needed.path, needed.facts, root, context.strings, context.driver?.version ?? null),
      call: null,
    };
  const found = calls
    .filter((call) => call.name === LIBCUDA && call.resolution.kind === 'loaded')
    .sort((a, b) => CALLER_ORDER.indexOf(a.reason) - CALLER_ORDER.indexOf(b.reason))[0];
  if (found === undefined || found.resolution.kind !== 'loaded') return null;
  return {
    map: found.resolution.map,
    facts: await describeLibcuda(
      found.resolution.map.path,
      found.resolution.map.facts,
      root,
      context.strings,
      context.driver?.version ?? null,
    ),
    call: found,
  };
}

/** Whether a directory holds a CUDA runtime (libcudart.so…): then it is a CUDA installation of its own. */
function holdsCudaRuntime(root: SystemRoot, directory: ByteString): boolean {
  const found = root.lookUp(directory);
  if (!found.ok) return false;
  try {
    return readdirSync(found.hostPath).some((name) => name.startsWith('libcudart.so'));
  } catch {
    return false;
  }
}

/**
 * The directories the dlopens of libcuda.so.1 that found nothing searched (the lists of runpaths and
 * LD_LIBRARY_PATH; not the cache and the default directories), with whether each exists, once each.
 */
function libcudaSearch(calls: readonly DlopenCall[], root: SystemRoot): SearchedDirectory[] {
  const result: SearchedDirectory[] = [];
  for (const call of calls) {
    if (call.name !== LIBCUDA || call.resolution.kind !== 'missing') continue;
    for (const list of call.resolution.searched) {
      if (list.rule === 'cache' || list.rule === 'default') continue;
      const listedBy =
        list.owner === null
          ? 'LD_LIBRARY_PATH'
          : `the ${list.rule === 'runpath' ? 'RUNPATH' : 'RPATH'} of ${byteStringToText(list.owner.path)}`;
      for (const directory of list.directories) {
        // A relative entry is the working directory's business.
        if (!directory.startsWith('/') || result.some((entry) => entry.directory === directory && entry.listedBy === listedBy)) continue;
        const found = root.lookUp(directory);
        result.push({ directory, listedBy, exists: found.ok && found.stats.isDirectory() });
      }
    }
  }
  return result;
}

/** Diagnoses `file` (open AS_THE_LOADER_READS), run with `ldLibraryPath` (a byte string; null: unset). */
export async function diagnoseFile(file: ElfFile, context: DoctorContext, ldLibraryPath: ByteString | null): Promise<FileDiagnosis> {
  const emulation = await emulateLoad(file, context.registry, ldLibraryPath);
  const dlopens = await resolveCudaDlopens(emulation, context.strings, context.listings);
  const usesCuda =
    dlopens.some((call) => call.name === LIBCUDA) || emulation.namespace.maps.some((map) => map.depth > 0 && map.name === LIBCUDA);
  const libcuda = usesCuda ? await chooseLibcuda(emulation, dlopens, context) : null;
  const { root } = context.registry.settings;
  const realPath = (map: LinkMap): ByteString => {
    const real = root.realPath(map.path);
    return typeof real === 'string' ? real : map.path;
  };
  const mixed = mixedInstallationsFinding(
    emulation.namespace.maps,
    (map) => dirnameBytePath(realPath(map)),
    (directory) => holdsCudaRuntime(root, directory),
  );
  const findings = [
    ...loadFindings(emulation),
    ...libcudaFindings(dlopens, libcuda, usesCuda, context.driver, libcuda === null ? libcudaSearch(dlopens, root) : [], (stub) =>
      stubAdvice(stub, emulation.namespace),
    ),
    ...driverPartsFindings(dlopens, libcuda, context.driver, (map) => driverVersionInName(realPath(map))),
    ...dlopenFindings(dlopens),
    ...(mixed === null ? [] : [mixed]),
    ...(await shadowingFindings(emulation, dlopens, context.strings, context.listings)),
  ];
  return { emulation, dlopens, usesCuda, libcuda, findings };
}
