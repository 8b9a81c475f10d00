// What doctor reports as wrong with one file: each finding says what happens at run time and how to
// fix it. Errors mean the program will not start or CUDA will not; warnings are worth a look.

import { type ByteString, byteStringToText } from '../elf/elf.js';
import { compatFindings } from './compat-findings.js';
import { LIBCUDA, type DlopenCall } from './cuda-dlopen.js';
import { compareDriverVersions, type DriverVersion } from './driver-version.js';
import type { LoadEmulation } from '../loader/emulate-load.js';
import type { LibcudaFacts } from './libcuda-facts.js';
import type { LinkMap } from '../loader/link-map.js';
import type { Edge } from '../loader/link-namespace.js';

export type Severity = 'error' | 'warning';

export interface Finding {
  readonly severity: Severity;
  /** Stable, for scripts: interpreter-missing, library-missing, load-error, libcuda-missing, libcuda-stub,
   *  cuda-803, compat-branch-unlisted, compat-note-unreadable (compat-findings.ts), driver-mismatch,
   *  libcuda-dependency-missing, compat-dependency-missing, libcuda-differs, driver-version-unknown,
   *  dlopen-missing, cuda-libraries-mixed, driver-libraries-mixed, nvml-mismatch, preload-missing,
   *  preload-refused; runpath-shadows-own and name-conflict (shadowing.ts); for a file named that is not
   *  a dynamic ELF file (named-file.ts), not-dynamic-elf and wrapper-environment. */
  readonly code: string;
  readonly message: string;
  /** What to do about it, or null when there is nothing specific. */
  readonly fix: string | null;
}

export interface LibcudaChoice {
  readonly map: LinkMap;
  readonly facts: LibcudaFacts;
  /** The dlopen that finds it first at run time; null when something needs libcuda.so.1 directly. */
  readonly call: DlopenCall | null;
}

const text = byteStringToText;

const DRIVER_FIX =
  'put the driver directory in the runpath of the libraries that load CUDA (cuda-patchelf apply ' +
  'adds /run/opengl-driver/lib), or install the NVIDIA driver where the loader looks (ld.so.cache, ' +
  'the default directories)';

/**
 * The directory the driver hook adds (DIR/lib, DIR-32/lib for i386; /run/opengl-driver by default): a runpath that names it
 * already has what apply gives.
 */
const DRIVER_LINK_DIRECTORY = /\/opengl-driver(-32)?\/lib\/?$/;

const DRIVER_LINK_MISSING_FIX =
  'that directory is made by the system, not by the package: on NixOS by hardware.graphics.enable ' +
  '(hardware.opengl.enable before 24.11) with the NVIDIA driver module ' +
  '(services.xserver.videoDrivers = [ "nvidia" ], hardware.nvidia); in a container by a driver ' +
  "mount (the NVIDIA Container Toolkit, --gpus or a CDI device, mounts the host's driver " +
  'libraries: they must land there, or in a directory in ld.so.cache or LD_LIBRARY_PATH); ' +
  'elsewhere, install the NVIDIA driver where the loader looks (ld.so.cache, the default ' +
  'directories)';

/** Why a compat libcuda fails to load on Jetson, where its dependencies are L4T's. */
const JETSON_COMPAT_NEEDS = ' (on Jetson the compat driver needs the L4T libraries libnvrm_gpu.so and libnvrm_mem.so)';

const DRIVER_LINK_EMPTY_FIX =
  'the NVIDIA driver is not among the drivers there: on NixOS, enable the NVIDIA driver module ' +
  '(services.xserver.videoDrivers = [ "nvidia" ], hardware.nvidia) next to ' +
  "hardware.graphics.enable; in a container, mount the host's driver libraries there (the NVIDIA " +
  'Container Toolkit)';

/** A directory a dlopen of libcuda.so.1 searched (RPATH, LD_LIBRARY_PATH, RUNPATH) and found no libcuda in. */
export interface SearchedDirectory {
  /** As the loader spelled it. */
  readonly directory: ByteString;
  /** Whose list named it: "RUNPATH of /…/libcudart.so.12", "LD_LIBRARY_PATH". */
  readonly listedBy: string;
  readonly exists: boolean;
}

/** libcuda found by no caller: where the callers looked tells a missing driver directory from one without the NVIDIA driver. */
function libcudaMissingFinding(searched: readonly SearchedDirectory[]): Finding {
  const base = `${LIBCUDA} is not found by any library that loads it: CUDA fails to initialize (no CUDA-capable device / driver not found)`;
  const driverLinks = searched.filter((entry) => DRIVER_LINK_DIRECTORY.test(entry.directory));
  // Each directory once, as people write it (without the loader's trailing '/'), with the lists that name it.
  const named = (entries: readonly SearchedDirectory[]): string =>
    [...new Set(entries.map((entry) => entry.directory))]
      .map(
        (directory) =>
          `${text(directory).replace(/(.)\/$/, '$1')} (in ${entries
            .filter((entry) => entry.directory === directory)
            .map((entry) => entry.listedBy)
            .join(' and ')})`,
      )
      .join(', ');
  const linkMissing = driverLinks.filter((entry) => !entry.exists);
  if (linkMissing.length > 0)
    return {
      severity: 'error',
      code: 'libcuda-missing',
      message: `${base}: ${named(linkMissing)} does not exist here`,
      fix: DRIVER_LINK_MISSING_FIX,
    };
  if (driverLinks.length > 0)
    return {
      severity: 'error',
      code: 'libcuda-missing',
      message: `${base}: ${named(driverLinks)} holds no ${LIBCUDA} here`,
      fix: DRIVER_LINK_EMPTY_FIX,
    };
  const missing = searched.filter((entry) => !entry.exists);
  return {
    severity: 'error',
    code: 'libcuda-missing',
    message: missing.length === 0 ? base : `${base}; ${named(missing)} ${missing.length === 1 ? 'does' : 'do'} not exist here`,
    fix: DRIVER_FIX,
  };
}

/** Findings about the load itself: the interpreter, missing libraries, a load that stops. */
export function loadFindings(emulation: LoadEmulation): Finding[] {
  const findings: Finding[] = [];
  if (!emulation.interpreter.found) {
    findings.push({
      severity: 'error',
      code: 'interpreter-missing',
      message:
        `the interpreter ${text(emulation.interpreter.path)} does not exist: the kernel cannot start the ` +
        'program ("No such file or directory")',
      fix: "install the C library the program was built against, or point PT_INTERP at this system's loader",
    });
  }
  for (const edge of emulation.edges) {
    const { resolution } = edge;
    if (resolution.kind === 'missing' && edge.preload) {
      findings.push({
        severity: 'warning',
        code: 'preload-missing',
        message:
          `${text(edge.name)}, named in ${text(emulation.loader.facts.preloadPath)}, is not found: the ` +
          'loader says so and goes on without it',
        fix: `remove ${text(edge.name)} from ${text(emulation.loader.facts.preloadPath)}, or install it`,
      });
    } else if (resolution.kind === 'fatal' && edge.preload) {
      // do_preload catches the error: a preload the loader cannot map is passed over too.
      findings.push({
        severity: 'warning',
        code: 'preload-refused',
        message:
          `${text(resolution.path)}, named in ${text(emulation.loader.facts.preloadPath)}, cannot be ` +
          `preloaded (${resolution.message}): the loader says so and goes on without it`,
        fix: `remove ${text(edge.name)} from ${text(emulation.loader.facts.preloadPath)}`,
      });
    } else if (resolution.kind === 'missing') {
      findings.push({
        severity: 'error',
        code: 'library-missing',
        message:
          `${text(edge.name)} (needed by ${text(edge.from.path)}) is not ` +
          `found${resolution.wrongClass ? ' (only a file of the other ELF class is there)' : ''}: ` +
          `${emulation.kind === 'program' ? 'the program does not start' : 'loading this library fails'}`,
        fix: `add the directory that holds ${text(edge.name)} to the runpath of ${text(edge.from.path)}`,
      });
    } else if (resolution.kind === 'fatal') {
      findings.push({
        severity: 'error',
        code: 'load-error',
        message: `${text(resolution.path)}: ${resolution.message}: the loader stops there`,
        fix: `remove or replace ${text(resolution.path)}, which stands where the loader looks for ${text(edge.name)}`,
      });
    }
  }
  return findings;
}

/** CUDA toolkit libraries besides the runtime (cuDNN and NCCL are released on their own, and left out). */
const TOOLKIT_LIBRARY =
  /^lib(cublas|cublasLt|cufft|cufftw|curand|cusparse|cusolver|cusolverMg|nvrtc|nvJitLink|nvToolsExt|cupti|npp\w*|nvjpeg)\.so/;

/**
 * Toolkit libraries loaded from another CUDA installation than the runtime: a directory that holds a
 * libcudart of its own is another installation. The one-package-per-directory layouts of pip wheels
 * (nvidia/cublas/lib…) and Nixpkgs (a store path per package) hold none there, and are fine.
 */
export function mixedInstallationsFinding(
  maps: readonly LinkMap[],
  realDirectory: (map: LinkMap) => ByteString,
  holdsRuntime: (directory: ByteString) => boolean,
): Finding | null {
  const runtime = maps.find((map) => map.depth > 0 && /^libcudart\.so/.test(map.name));
  if (runtime === undefined) return null;
  const runtimeDirectory = realDirectory(runtime);
  const foreign = maps.filter(
    (map) => map.depth > 0 && TOOLKIT_LIBRARY.test(map.name) && realDirectory(map) !== runtimeDirectory && holdsRuntime(realDirectory(map)),
  );
  if (foreign.length === 0) return null;
  const where = [...new Set(foreign.map(realDirectory))].map(text).join(', ');
  return {
    severity: 'warning',
    code: 'cuda-libraries-mixed',
    message:
      `${foreign.map((map) => text(map.name)).join(', ')} come${foreign.length === 1 ? 's' : ''} from ` +
      `${where}, another CUDA installation (it has a libcudart of its own) than the runtime ` +
      `${text(runtime.path)}: libraries of different CUDA releases may not work together`,
    fix: 'let the runpath find all CUDA libraries of one installation (the first runpath entry that has one usually decides)',
  };
}

/**
 * The driver's other parts next to the libcuda in use: its PTX JIT compiler must be of the libcuda's
 * release (a compat libcuda brings its own), and NVML of the kernel driver's (it talks to the module).
 */
export function driverPartsFindings(
  calls: readonly DlopenCall[],
  choice: LibcudaChoice | null,
  driver: DriverVersion | null,
  versionOf: (map: LinkMap) => string | null,
): Finding[] {
  if (choice === null) return [];
  const findings: Finding[] = [];
  const jit = calls.find(
    (call) => call.reason === 'driver' && call.caller.facts.fileId === choice.map.facts.fileId && call.resolution.kind === 'loaded',
  );
  const jitVersion = jit?.resolution.kind === 'loaded' ? versionOf(jit.resolution.map) : null;
  if (jit?.resolution.kind === 'loaded' && jitVersion !== null && choice.facts.version !== null && jitVersion !== choice.facts.version) {
    findings.push({
      severity: 'warning',
      code: 'driver-libraries-mixed',
      message:
        `${LIBCUDA} (${choice.facts.version}) opens ${text(jit.resolution.map.path)} of version ` +
        `${jitVersion}: the PTX JIT compiler of another driver release can fail to compile PTX at run ` +
        'time',
      fix:
        `put the directory of the matching libnvidia-ptxjitcompiler.so.${choice.facts.version} first ` +
        `where ${text(choice.map.path)} looks`,
    });
  }
  const nvml = calls.find((call) => call.name === 'libnvidia-ml.so.1' && call.resolution.kind === 'loaded');
  const nvmlVersion = nvml?.resolution.kind === 'loaded' ? versionOf(nvml.resolution.map) : null;
  if (nvml?.resolution.kind === 'loaded' && nvmlVersion !== null && driver !== null && nvmlVersion !== driver.version) {
    findings.push({
      severity: 'warning',
      code: 'nvml-mismatch',
      message:
        `libnvidia-ml.so.1 is ${text(nvml.resolution.map.path)} of version ${nvmlVersion}, the kernel ` +
        `driver ${driver.version}: NVML fails with "Driver/library version mismatch"`,
      fix: 'load the NVML of the running driver (the driver directory, not a copy of another release)',
    });
  }
  return findings;
}

function describeChoice(choice: LibcudaChoice): string {
  const version = choice.facts.version === null ? 'version unknown' : `version ${choice.facts.version}`;
  return `${text(choice.map.path)} (${choice.facts.kind}, ${version})`;
}

/**
 * Findings about the driver the program would use, given the kernel driver's version when known;
 * `searched`: the directories the dlopens of libcuda went through without finding it.
 */
export function libcudaFindings(
  calls: readonly DlopenCall[],
  choice: LibcudaChoice | null,
  usesCuda: boolean,
  driver: DriverVersion | null,
  searched: readonly SearchedDirectory[],
  stubFix: (stub: LinkMap) => string,
): Finding[] {
  const findings: Finding[] = [];
  if (!usesCuda) return findings;
  if (choice === null) return [libcudaMissingFinding(searched)];
  const found = describeChoice(choice);
  if (choice.facts.kind === 'stub') {
    findings.push({
      severity: 'error',
      code: 'libcuda-stub',
      message: `${LIBCUDA} would be the link-time stub ${found}: CUDA fails with error 34 (CUDA driver is a stub library)`,
      fix: stubFix(choice.map),
    });
  }
  if (choice.facts.kind === 'compat') findings.push(...compatFindings(choice, found, driver));
  if (
    choice.facts.kind === 'driver' &&
    driver !== null &&
    choice.facts.version !== null &&
    compareDriverVersions(choice.facts.version, driver.version) !== 0
  ) {
    findings.push({
      severity: 'error',
      code: 'driver-mismatch',
      message:
        `${LIBCUDA} is ${found}, but the kernel driver is ${driver.version} (${driver.source}): the ` +
        'user-space driver must match the kernel module exactly, CUDA fails to initialize',
      fix: 'load the libcuda of the running driver (reboot after a driver upgrade, or point the runpath at the current driver directory)',
    });
  }
  const own = choice.call;
  const failed = own?.dependencies.filter((edge) => edge.resolution.kind !== 'loaded') ?? [];
  if (failed.length > 0) {
    const names = failed.map((edge) => text(edge.name)).join(', ');
    findings.push({
      severity: 'error',
      code: choice.facts.kind === 'compat' ? 'compat-dependency-missing' : 'libcuda-dependency-missing',
      message:
        `${found} needs ${dependencyFailures(failed)}: the dlopen of ${LIBCUDA} ` +
        `fails${choice.facts.kind === 'compat' ? JETSON_COMPAT_NEEDS : ''}`,
      fix:
        choice.facts.kind === 'compat'
          ? 'make the L4T driver libraries findable (their directory in ld.so.cache or the runpath), or drop the cuda_compat hook'
          : `make ${names} load from ${text(choice.map.path)}`,
    });
  }
  const others = new Map<string, DlopenCall>();
  for (const call of calls) {
    if (call.name !== LIBCUDA || call.resolution.kind !== 'loaded' || call.resolution.map.facts.fileId === choice.map.facts.fileId)
      continue;
    others.set(call.resolution.map.facts.fileId, call);
  }
  for (const other of others.values()) {
    if (other.resolution.kind !== 'loaded') continue;
    findings.push({
      severity: 'warning',
      code: 'libcuda-differs',
      message:
        `${text(other.caller.path)} would load ${text(other.resolution.map.path)} instead of ` +
        `${text(choice.map.path)}: which one CUDA uses depends on which library opens it first`,
      fix: 'give the libraries that load CUDA the same driver directories, in the same order',
    });
  }
  return findings;
}

/**
 * Dependencies that did not load, in words: "libx.so, liby.so, which are not found", and for the one
 * the loader found and refused (the last the emulation lists: a refusal ends it) what the loader says
 * of it. The dependency may be an indirect one. A real dlopen stops at the first failure.
 */
function dependencyFailures(failed: readonly Edge[]): string {
  const missing = failed.filter((edge) => edge.resolution.kind === 'missing').map((edge) => text(edge.name));
  const parts = missing.length === 0 ? [] : [`${missing.join(', ')}, which ${missing.length === 1 ? 'is' : 'are'} not found`];
  for (const edge of failed)
    if (edge.resolution.kind === 'fatal')
      parts.push(`${text(edge.name)}, which cannot be loaded (${text(edge.resolution.path)}: ${edge.resolution.message})`);
  return parts.join('; ');
}

/**
 * Other dlopen names that do not load, the library itself or one of its dependencies: builtins of
 * NVRTC always matter; a `.note.dlopen` says how much the rest do.
 */
export function dlopenFindings(calls: readonly DlopenCall[]): Finding[] {
  const findings: Finding[] = [];
  const seen = new Set<ByteString>();
  for (const call of calls) {
    const failed = call.dependencies.filter((edge) => edge.resolution.kind !== 'loaded');
    if (call.name === LIBCUDA || (call.resolution.kind === 'loaded' && failed.length === 0) || seen.has(call.name)) continue;
    const nvrtc = call.reason === 'nvrtc';
    const noted = call.reason === 'note' && (call.notePriority === 'required' || call.notePriority === 'recommended');
    if (!nvrtc && !noted) continue;
    seen.add(call.name);
    const { resolution } = call;
    const what =
      resolution.kind === 'loaded'
        ? `it needs ${dependencyFailures(failed)}`
        : resolution.kind === 'fatal'
          ? `the loader cannot load it (${text(resolution.path)}: ${resolution.message})`
          : 'it is not found';
    findings.push({
      severity: nvrtc || call.notePriority === 'required' ? 'error' : 'warning',
      code: 'dlopen-missing',
      message:
        `${text(call.caller.path)} opens ${text(call.name)} with dlopen, and ` +
        `${what}${nvrtc ? ': runtime compilation (NVRTC) fails' : ` (its .note.dlopen says ${call.notePriority ?? ''})`}`,
      fix:
        resolution.kind === 'missing'
          ? `put the directory of ${text(call.name)} in the runpath of ${text(call.caller.path)}`
          : `make ${text(call.name)} and what it needs load from ${text(call.caller.path)}`,
    });
  }
  return findings;
}
