// What a libcuda.so.1 is: the driver's own, one from cuda_compat (the forward-compatibility package
// that must not be older than the kernel driver), or a link-time stub that cannot run anything; and
// its version, from its file name, the file its link points at, or the version string it carries.
// NVIDIA's compat note (.note.cuda.fwd_compatibility) marks a real libcuda, never a stub, but not a
// compat one alone: the driver's own libcuda carries it too (seen on a 580.159.04 driver, whose
// libcuda's note equals its compat package's). So with the note, a libcuda of the kernel driver's own
// release is the driver's and any other is compat, wherever it lies (NVIDIA's rule then decides);
// without the kernel driver's version, or without the note, the directory and the size tell.

import { type ByteString, byteStringToText, type CudaCompatNoteReading } from '../elf/elf.js';
import type { ObjectFacts } from '../loader/object-facts.js';
import type { ObjectStrings } from './object-strings.js';
import type { SystemRoot } from '../loader/system-root.js';

export type LibcudaKind = 'driver' | 'compat' | 'stub';

export interface LibcudaFacts {
  readonly kind: LibcudaKind;
  readonly version: string | null;
  readonly versionSource: 'file name' | 'link target' | 'library contents' | null;
  /** The real path (links resolved), as the emulated system names it. */
  readonly realPath: ByteString;
  /** Its `.note.cuda.fwd_compatibility` (compat libcudas carry it, and drivers' of recent releases): what NVIDIA's rule reads. */
  readonly compatNote: CudaCompatNoteReading;
}

/** The real driver's code is tens of MiB; the toolkit's stub has a few KiB of functions that fail. */
const STUB_CODE_BYTES = 1024 * 1024;
/** A driver version as NVIDIA numbers them (535.261.03, 580.95.05): a three-digit major. */
const DRIVER_VERSION = /^\d{3,}\.\d+(\.\d+)?$/;
const VERSION_SHAPE = { maxLength: 16, firstByte: (byte: number): boolean => byte >= 0x30 && byte <= 0x39 };

/** The driver release in a driver library's file name: libcuda.so.580.95.05, libnvidia-ml.so.580.95.05. */
export function driverVersionInName(path: string): string | null {
  const version = /(?:^|\/)lib[\w-]+\.so\.([\d.]+)$/.exec(path)?.[1];
  return version !== undefined && DRIVER_VERSION.test(version) ? version : null;
}

function directories(path: string): string[] {
  return path.split('/').slice(0, -1);
}

/** Whether a libcuda lies where compat packages put theirs: a `compat` directory, a cuda_compat or cuda-compat path. */
export function liesInCompatDirectory(path: string, realPath: string): boolean {
  return [...directories(path), ...directories(realPath)].includes('compat') || /cuda[-_]compat/.test(`${path}\0${realPath}`);
}

/**
 * `noted`: it carries the compat note; `ownRelease`: its version is the kernel driver's (null when either
 * is unknown).
 */
function libcudaKind(path: string, realPath: string, codeBytes: number, noted: boolean, ownRelease: boolean | null): LibcudaKind {
  if (noted && ownRelease !== null) return ownRelease ? 'driver' : 'compat';
  if (!noted && ([...directories(path), ...directories(realPath)].includes('stubs') || codeBytes < STUB_CODE_BYTES)) return 'stub';
  return liesInCompatDirectory(path, realPath) ? 'compat' : 'driver';
}

/** The version of the libcuda at `path`: its file name's, its link target's, else none yet (its contents tell). */
function versionInNames(path: string, realPath: string): Pick<LibcudaFacts, 'version' | 'versionSource'> | null {
  const named = driverVersionInName(path);
  if (named !== null) return { version: named, versionSource: 'file name' };
  const linked = driverVersionInName(realPath);
  return linked === null ? null : { version: linked, versionSource: 'link target' };
}

/**
 * The libcuda at `path` (as the emulated system names it), whose facts were read from the file;
 * `kernelDriver`: the running driver's version, null when it is not known.
 */
export async function describeLibcuda(
  path: ByteString,
  facts: ObjectFacts,
  root: SystemRoot,
  strings: ObjectStrings,
  kernelDriver: string | null,
): Promise<LibcudaFacts> {
  const real = root.realPath(path);
  const realPath = typeof real === 'string' ? real : path;
  const compatNote = await strings.compatNote(facts);
  const noted = compatNote.kind !== 'absent';
  const inNames = versionInNames(path, realPath);
  // A stub carries no version; the first version-shaped string of another's .rodata is its own (a table of older ones follows it).
  const mayCarry = inNames === null && (noted || libcudaKind(path, realPath, facts.codeBytes, false, null) !== 'stub');
  const carried = mayCarry
    ? await strings.firstInRodata(facts, 'driver-version', VERSION_SHAPE, (text) => DRIVER_VERSION.test(text))
    : null;
  // The version's characters are digits and dots (DRIVER_VERSION), ASCII: the same as text.
  const version = carried === null ? null : byteStringToText(carried);
  const versioned = inNames ?? { version, versionSource: version === null ? null : ('library contents' as const) };
  const ownRelease = kernelDriver === null || versioned.version === null ? null : versioned.version === kernelDriver;
  return { kind: libcudaKind(path, realPath, facts.codeBytes, noted, ownRelease), ...versioned, realPath, compatNote };
}
