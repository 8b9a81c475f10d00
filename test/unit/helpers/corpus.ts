// The committed corpus (test/unit/corpus/), read into memory and opened through the project's reader
// over a MemoryByteSource: no file handle, no fixture, no tool.

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { readElfImage, type ElfImage } from '../../../src/elf/elf-image.js';
import { MemoryByteSource } from '../../helpers/memory-byte-source.js';

const CORPUS = fileURLToPath(new URL('../corpus/', import.meta.url));

/** A fresh copy of a corpus file's bytes: tests may write into it. */
export function corpusBytes(name: string): Uint8Array {
  return new Uint8Array(readFileSync(CORPUS + name));
}

export function readImage(bytes: Uint8Array): Promise<ElfImage> {
  return readElfImage(new MemoryByteSource(bytes));
}

export function corpusImage(name: string): Promise<ElfImage> {
  return readImage(corpusBytes(name));
}
