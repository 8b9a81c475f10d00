// Opening a file as an ELF image for the length of one piece of work.

import { FileByteSource } from './byte-source.js';
import { readElfImage, type ElfImage } from './elf-image.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';

/** Runs `work` on the file's image and closes the file; any error comes back naming the file. */
export async function withElfImage<T>(path: string, work: (image: ElfImage, source: FileByteSource) => Promise<T>): Promise<T> {
  let source: FileByteSource | undefined;
  try {
    source = FileByteSource.open(path);
    return await work(await readElfImage(source), source);
  } catch (error) {
    throw error instanceof CudaPatchelfError ? error.withFile(path) : error;
  } finally {
    source?.close();
  }
}
