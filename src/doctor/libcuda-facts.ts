// What a libcuda.so.1 is: the driver's own, one from cuda_compat (the forward-compatibility package
// that must not be older than the kernel driver), or a link-time stub that cannot run anything; and
// its version, from its file name, the file its link points at, or the version string it carries.

import type { CudaCompatNoteReading } from '../elf/cuda-compat-note.js';
import type { ObjectFacts } from '../loader/object-facts.js';
import type { ObjectStrings } from './object-strings.js';
import type { SystemRoot } from '../loader/system-root.js';

export type LibcudaKind = 'driver' | 'compat' | 'stub';

export interface LibcudaFacts {
  readonly kind: LibcudaKind;
  readonly version: string | null;
  readonly versionSource: 'file name' | 'link target' | 'library contents' | null;
  /** The real path (links resolved), as the emulated system names it. */
  readonly realPath: string;
  /** Its `.note.cuda.fwd_compatibility`, which only NVIDIA's compat libcuda carries: what NVIDIA's rule reads. */
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

/** A libcuda with the compat note is compat wherever it lies and however small (a stand-in); without, the directory and the size tell. */
function libcudaKind(path: string, realPath: string, codeBytes: number, noted: boolean): LibcudaKind {
  if (noted) return 'compat';
  const dirs = [...directories(path), ...directories(realPath)];
  if (dirs.includes('stubs') || codeBytes < STUB_CODE_BYTES) return 'stub';
  if (dirs.includes('compat') || /cuda[-_]compat/.test(path) || /cuda[-_]compat/.test(realPath)) return 'compat';
  return 'driver';
}

/** The libcuda at `path` (as the emulated system names it), whose facts were read from the file. */
export async function describeLibcuda(path: string, facts: ObjectFacts, root: SystemRoot, strings: ObjectStrings): Promise<LibcudaFacts> {
  const real = root.realPath(path);
  const realPath = typeof real === 'string' ? real : path;
  const compatNote = await strings.compatNote(facts);
  const kind = libcudaKind(path, realPath, facts.codeBytes, compatNote.kind !== 'absent');
  const named = driverVersionInName(path);
  if (named !== null) return { kind, version: named, versionSource: 'file name', realPath, compatNote };
  const linked = driverVersionInName(realPath);
  if (linked !== null) return { kind, version: linked, versionSource: 'link target', realPath, compatNote };
  if (kind === 'stub') return { kind, version: null, versionSource: null, realPath, compatNote };
  // The first version-shaped string of .rodata is the library's own (a table of older ones follows it).
  const carried = await strings.firstInRodata(facts, 'driver-version', VERSION_SHAPE, (text) => DRIVER_VERSION.test(text));
  return { kind, version: carried, versionSource: carried === null ? null : 'library contents', realPath, compatNote };
}
