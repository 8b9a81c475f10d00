// A cuda_compat package as --cuda-compat names it, as the cuda_compat hook takes one: DIR/compat holds
// the compat libcuda.so.X.Y.Z (and its libcuda.so.1 link) and the other libraries of its release
// (libnvidia-ptxjitcompiler, libnvidia-nvvm, libcudadebugger…). NVIDIA's container toolkit looks for
// exactly one libcuda.so.X.Y.Z there, takes the compat driver version from its name, and reads its note.

import { join } from 'node:path';
import { type CudaCompatNoteReading, ElfFile } from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { driverVersionInName } from '../doctor/libcuda-facts.js';
import { namesIn, realFile, releaseFilesIn } from './release-files.js';

export interface CompatCandidate {
  /** The package, as --cuda-compat named it. */
  readonly dir: string;
  /** The real path of its libcuda.so.X.Y.Z; null when it has none, or more than one. */
  readonly libcuda: string | null;
  /** The compat driver version, from that name. */
  readonly version: string | null;
  readonly note: CudaCompatNoteReading;
  /** Its libraries of that release, libcuda first. */
  readonly files: readonly string[];
  /** Why it cannot be weighed at all (no libcuda.so.X.Y.Z, several, not an ELF file); null when it can. */
  readonly problem: string | null;
}

/** What `libcuda` says in its note; a file that is not an ELF library is a problem, in words. */
async function noteOf(libcuda: string): Promise<CudaCompatNoteReading | string> {
  const opened = await ElfFile.open(libcuda);
  if (opened.kind !== 'elf') return opened.error.message;
  try {
    return await opened.file.cudaCompatNote();
  } catch (error) {
    if (!(error instanceof CudaPatchelfError)) throw error;
    return error.message;
  } finally {
    opened.file.close();
  }
}

/** The package at `dir`; an io error when DIR/compat cannot be listed (it does not exist: a wrong --cuda-compat). */
export async function readCompatCandidate(dir: string): Promise<CompatCandidate> {
  const compat = join(dir, 'compat');
  const absent = { dir, libcuda: null, version: null, note: { kind: 'absent' }, files: [] } as const;
  const libcudas = [
    ...new Set(
      namesIn(compat).flatMap((name) => {
        const real = name.startsWith('libcuda.so.') ? realFile(join(compat, name)) : null;
        return real !== null && driverVersionInName(real) !== null ? [real] : [];
      }),
    ),
  ];
  const [libcuda] = libcudas;
  if (libcuda === undefined)
    return { ...absent, problem: `${compat} holds no libcuda.so.X.Y.Z: its driver version cannot be compared with the kernel driver's` };
  if (libcudas.length > 1)
    return { ...absent, problem: `${compat} holds ${libcudas.length} libcuda.so.X.Y.Z (${libcudas.join(', ')}), not one` };
  const version = driverVersionInName(libcuda);
  const note = await noteOf(libcuda);
  if (typeof note === 'string') return { ...absent, problem: `${libcuda}: ${note}` };
  return { dir, libcuda, version, note, files: version === null ? [] : releaseFilesIn(compat, version), problem: null };
}
