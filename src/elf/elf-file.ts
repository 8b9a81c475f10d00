// The reader's public face, as Go's debug/elf File is: an ELF file opened by path, its header and
// program headers decoded, its dynamic array found, the rest read on request (dynamic strings and
// values, sections, notes) with a few small positional reads, and closed. Errors name the file.

import type { Stats } from 'node:fs';
import { FileByteSource } from './byte-source.js';
import type { ByteString } from './byte-string.js';
import type { ProgramHeader } from './codec.js';
import {
  dynamicStringsOf,
  lastDynamicString,
  readElfImage,
  readHeaderBytes,
  type ElfHeader,
  type ElfImage,
  type ReadOptions,
} from './elf-image.js';
import { readCudaCompatNote, type CudaCompatNoteReading } from './cuda-compat-note.js';
import { hasElfMagic } from './file-kind.js';
import { readNotes, type ElfNote } from './notes.js';
import { readSectionHeaders, type Section } from './section-headers.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';

export interface OpenOptions extends ReadOptions {
  /** False refuses a path that is a symbolic link; by default a link is followed. */
  readonly followLink?: boolean;
}

/** What opening a path as an ELF file found: the file, or why there is none, as a value naming the file. */
export type OpenedElf =
  | { readonly kind: 'elf'; readonly file: ElfFile }
  /** A file without the ELF magic (empty, an archive, a script…); the error says what it is, as `print` says it. */
  | { readonly kind: 'not-elf'; readonly error: CudaPatchelfError }
  /** A file that cannot be opened or read, or an ELF file too malformed to read. */
  | { readonly kind: 'failed'; readonly error: CudaPatchelfError };

/** An error raised below the layer that knows the path, attributed to `path`; other errors as they are. */
function named(error: unknown, path: string): unknown {
  return error instanceof CudaPatchelfError ? error.withFile(path) : error;
}

export class ElfFile {
  readonly path: string;
  /** The stat taken when the file was opened (a writer checks the file is still that one). */
  readonly stats: Stats;
  /** The decoded structures the planner starts from, over this file's byte source. */
  readonly image: ElfImage;
  /** e_machine, e_type, EI_OSABI and the other header fields. */
  readonly header: ElfHeader;
  readonly programHeaders: readonly ProgramHeader[];
  /** PT_INTERP's path, as a byte string; null without one. */
  readonly interpreter: ByteString | null;
  private readonly source: FileByteSource;

  private constructor(source: FileByteSource, image: ElfImage) {
    this.path = source.path;
    this.stats = source.stats;
    this.source = source;
    this.image = image;
    this.header = image.header;
    this.programHeaders = image.programHeaders;
    this.interpreter = image.interpreter;
  }

  /**
   * Opens the file at `path` and reads its header, program headers and dynamic array: a few small
   * reads, most often one. Whatever stops that comes back as a value (OpenedElf), the file closed.
   */
  static async open(path: string, options: OpenOptions = {}): Promise<OpenedElf> {
    let source: FileByteSource;
    try {
      source = FileByteSource.open(path, { followLink: options.followLink !== false });
    } catch (error) {
      if (!(error instanceof CudaPatchelfError)) throw error;
      return { kind: 'failed', error: error.withFile(path) };
    }
    let head: Uint8Array | null = null;
    try {
      // The read readElfImage starts with: it serves that one from memory.
      head = await readHeaderBytes(source);
      return { kind: 'elf', file: new ElfFile(source, await readElfImage(source, options)) };
    } catch (error) {
      source.close();
      if (!(error instanceof CudaPatchelfError)) throw error;
      return { kind: head !== null && !hasElfMagic(head) ? 'not-elf' : 'failed', error: error.withFile(path) };
    }
  }

  /**
   * The ELF file open in `source` (a file sniffed and stat'ed already), read as `open` reads it; errors
   * name the file. Closing the ElfFile closes `source`.
   */
  static async read(source: FileByteSource, options: ReadOptions = {}): Promise<ElfFile> {
    try {
      return new ElfFile(source, await readElfImage(source, options));
    } catch (error) {
      throw named(error, source.path);
    }
  }

  /** The values of every dynamic entry with this tag, in file order (Go's DynValue). */
  dynValues(tag: number): number[] {
    return this.image.dynamic?.entries.filter((entry) => entry.d_tag === tag).map((entry) => entry.d_val) ?? [];
  }

  /** The strings of every dynamic entry with this tag (DT_NEEDED…), in file order (Go's DynString). */
  dynStrings(tag: number): Promise<ByteString[]> {
    return this.named(dynamicStringsOf(this.image, tag));
  }

  /** The string of the last entry with this tag (DT_SONAME, DT_RUNPATH, DT_RPATH), as the loader keeps it; null without one. */
  lastDynString(tag: number): Promise<ByteString | null> {
    return this.named(lastDynamicString(this.image, tag));
  }

  /** The section headers, with their names; none in a stripped file without a table. */
  sections(): Promise<Section[]> {
    return this.named(readSectionHeaders(this.image));
  }

  /** The notes of the PT_NOTE segments (of the SHT_NOTE sections in a file without program headers). */
  notes(): Promise<ElfNote[]> {
    return this.named(readNotes(this.image));
  }

  /** What a CUDA compat libcuda's `.note.cuda.fwd_compatibility` says (absent from every other file). */
  cudaCompatNote(): Promise<CudaCompatNoteReading> {
    return this.named(readCudaCompatNote(this.image));
  }

  /** `length` bytes at file offset `position` (a view of the read: copy before changing them). */
  bytes(position: number, length: number, what: string): Promise<Uint8Array> {
    return this.named(this.source.read(position, length, what));
  }

  close(): void {
    this.source.close();
  }

  private async named<T>(work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (error) {
      throw named(error, this.path);
    }
  }
}

/**
 * Runs `work` on the ELF file at `path` and closes it; a file that is not ELF, cannot be read, or
 * fails `work` throws, the error naming the file.
 */
export async function withElfFile<T>(path: string, work: (file: ElfFile) => Promise<T>, options: OpenOptions = {}): Promise<T> {
  const opened = await ElfFile.open(path, options);
  if (opened.kind !== 'elf') throw opened.error;
  try {
    return await work(opened.file);
  } catch (error) {
    throw named(error, path);
  } finally {
    opened.file.close();
  }
}
