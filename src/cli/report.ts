// How the CLI turns errors and byte strings into lines for people and JSON for machines.

import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';

/** One line for stderr: the file, what is wrong and where. Unexpected errors say so. */
export function errorLine(error: unknown, file?: string): string {
  if (error instanceof CudaPatchelfError) return `cuda-patchelf: ${(file === undefined ? error : error.withFile(file)).describe()}`;
  const message = error instanceof Error ? error.message : String(error);
  return `cuda-patchelf: ${file === undefined ? '' : `${file}: `}internal error: ${message}`;
}

/** The JSON form of an error, with stable field names. */
export function errorJson(error: unknown): { kind: string; message: string; offset: number | null } {
  if (error instanceof CudaPatchelfError) return { kind: error.kind, message: error.message, offset: error.offset ?? null };
  return { kind: 'internal', message: error instanceof Error ? error.message : String(error), offset: null };
}
