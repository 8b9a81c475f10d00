// Positional reads from a file: the reader asks for the few ranges it needs, never the whole file.

import { closeSync, constants as fsConstants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import { CudaPatchelfError, malformedInput } from '../errors/cuda-patchelf-error.js';
import { describeFileType, ioError } from '../errors/io-error.js';
import { hasElfMagic } from './file-kind.js';

/** Bytes addressed by file offset, bounds-checked against the size the file had when it was opened. */
export interface ByteSource {
  readonly size: number;
  /**
   * Exactly `length` bytes at `position`, or a format error when the range is outside the file. The
   * bytes may be shared with other reads of the same range: callers copy before they modify.
   */
  read(position: number, length: number, what: string): Promise<Uint8Array>;
}

/** A DataView over exactly these bytes (a read may be a view into a larger buffer). */
export function dataViewOf(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Throws unless [position, position+length) lies inside a file of `size` bytes. */
export function checkRange(size: number, position: number, length: number, what: string): void {
  if (!Number.isSafeInteger(position) || !Number.isSafeInteger(length) || position < 0 || length < 0) {
    throw malformedInput(
      `${what} has an impossible offset or size (offset ${position}, size ${length})`,
      position >= 0 ? position : undefined,
    );
  }
  if (position + length > size) {
    throw malformedInput(
      `${what} (0x${length.toString(16)} bytes at 0x${position.toString(16)}) runs past the end of the file (size 0x${size.toString(16)})`,
      position,
    );
  }
}

/**
 * Small reads are widened to whole blocks of this size, the page cache's unit, so that neighbours come
 * with one system call: the first read brings the ELF header, the program headers and what follows
 * them (notes, the hash table, often the string table); the section header table brings the section
 * name table the linker puts just before it; in a small file, the dynamic array brings the section
 * headers after it. Copying a few KiB more costs less than a system call.
 */
const BLOCK = 4096;

/**
 * Reads up to this size are kept to be served again. Larger ones (string and symbol tables) are not:
 * their system call costs little next to the copy, and they are rarely read twice.
 */
const KEPT_READ = 16 * 1024;

/**
 * Blocks kept per file, at most: a real file keeps a dozen. A hostile one can make the reader walk
 * far (a GNU hash chain with no end bit over a file of gigabytes), and past this the reads are made
 * as asked, unkept, so that neither the memory held nor the search through what is kept grows with it.
 */
const KEPT_BLOCKS = 64;

/**
 * The first block of a file (its first read, which sniffs the magic or reads the ELF header) is read
 * here first: most files of a tree are not ELF, and for them the copy kept is a few bytes on the
 * heap instead of a block of memory of its own that only the garbage collector gives back.
 */
const headScratch = new Uint8Array(BLOCK);

/**
 * Reads up to this size are carved out of a shared slab instead of an ArrayBuffer each: a file's few
 * reads of a few KiB would otherwise cost a memory allocation, a free and a garbage-collector sweep
 * each. A slab is given back once no read from it is referenced any more; a batch drops each file's
 * reads when the file is done, so the slabs held stay few.
 */
const SLAB_READ = 16 * 1024;
const SLAB = 256 * 1024;
let slab = new ArrayBuffer(0);
let slabUsed = 0;

/** `length` bytes of uninitialized memory that no other read shares: every byte is to be read into. */
function readBuffer(length: number): Uint8Array {
  if (length > SLAB_READ) return new Uint8Array(Buffer.allocUnsafeSlow(length).buffer, 0, length);
  if (slabUsed + length > slab.byteLength) {
    slab = Buffer.allocUnsafeSlow(SLAB).buffer;
    slabUsed = 0;
  }
  const bytes = new Uint8Array(slab, slabUsed, length);
  // 8-byte alignment keeps a DataView over any read on aligned addresses.
  slabUsed += (length + 7) & ~7;
  return bytes;
}

/**
 * What a file keeps of its first block when that is not the ELF header it is about to read (a file that
 * is not ELF, or one not stat'ed yet), at least: enough for every magic number callers test.
 */
const NOT_ELF_HEAD = 16;

/**
 * Opens `path` for reading. O_NONBLOCK keeps a FIFO from blocking the open; `followLink` false
 * refuses a path that is a symbolic link (a walk listed a regular file there).
 */
function openDescriptor(path: string, followLink: boolean): number {
  try {
    return openSync(path, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK | (followLink ? 0 : fsConstants.O_NOFOLLOW));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ELOOP' && !followLink) {
      throw new CudaPatchelfError('changed', 'is a symbolic link now, not the regular file the walk listed; left alone', {
        file: path,
        cause: error,
      });
    }
    throw ioError(path, 'open', error);
  }
}

/** The open file's stat; throws for a file that is not a regular one. */
function statOfDescriptor(fd: number, path: string): Stats {
  let stats: Stats;
  try {
    stats = fstatSync(fd);
  } catch (error) {
    throw ioError(path, 'stat', error);
  }
  if (!stats.isFile()) throw new CudaPatchelfError('io', `not a regular file (${describeFileType(stats)})`, { file: path });
  return stats;
}

/**
 * Reads the first block through the shared scratch buffer, and returns a copy of what is worth keeping:
 * all of it when `wholeIfElf` and it starts as an ELF file does, else its first bytes up to `end` (the
 * end of the read that asked for it, NOT_ELF_HEAD at least). One read, with no stat to size it: a read
 * of a regular file comes back short only at its end. `length` is what the read returned.
 */
function readFirstBlock(
  fd: number,
  path: string,
  end: number,
  wholeIfElf: boolean,
): { readonly head: Uint8Array; readonly length: number } {
  let length: number;
  try {
    length = readSync(fd, headScratch, 0, BLOCK, 0);
  } catch (error) {
    throw ioError(path, 'read', error);
  }
  const kept = wholeIfElf && hasElfMagic(headScratch.subarray(0, length)) ? length : Math.min(length, Math.max(end, NOT_ELF_HEAD));
  const head = readBuffer(kept);
  head.set(headScratch.subarray(0, kept));
  return { head, length };
}

/**
 * A file a tree walk listed as a regular file, open without a stat: most files of a tree are not ELF,
 * and `firstBytes` tells them apart by their first bytes alone. The link is not followed (one swapped
 * for a link after the walk would lead out of the tree). A path swapped for a FIFO or a device after the
 * walk gets one non-blocking read (O_NONBLOCK); should what it reads start as an ELF file does,
 * `statNow` then refuses it.
 */
export class FileHead {
  readonly path: string;
  bytesRead = 0;
  private readonly fd: number;
  private head: Uint8Array | null = null;

  private constructor(path: string, fd: number) {
    this.path = path;
    this.fd = fd;
  }

  static openWalked(path: string): FileHead {
    return new FileHead(path, openDescriptor(path, false));
  }

  /**
   * Up to `length` of the file's first bytes, fewer when the file is shorter: the first block is read
   * once, and only its first bytes are kept (the block is read again after the stat).
   */
  firstBytes(length: number): Uint8Array {
    if (this.head === null) {
      const { head, length: read } = readFirstBlock(this.fd, this.path, length, false);
      this.bytesRead += read;
      this.head = head;
    }
    return this.head.subarray(0, Math.min(length, this.head.length));
  }

  /**
   * Takes the file's stat now (fstat) and hands the open file over to the FileByteSource it returns,
   * which closes it; throws, leaving this head open, for a file that is not a regular one. What was
   * read before the stat (the first block, which told an ELF file from the others) is not carried
   * over: the source reads it again when asked, so that a change made before the stat and after that
   * read is not missed when the stat already shows the changed file (batch/changed-while-read.ts).
   */
  statNow(): FileByteSource {
    return new FileByteSource(this.path, this.fd, statOfDescriptor(this.fd, this.path), this.bytesRead);
  }

  /** Closes the file; only for a head whose statNow was not taken or failed. */
  close(): void {
    closeSync(this.fd);
  }
}

/**
 * A ByteSource over an open regular file, sized by the stat taken when it was opened; counts what it
 * reads (the benchmarks report it). The reads are synchronous system calls behind the async
 * interface: a read is a few hundred bytes from the page cache, where a thread-pool round trip per
 * read costs more than the read itself, and `apply` gets its parallelism from worker threads, not
 * from reads in flight. What a small read
 * already fetched is served again from memory (a view of the same bytes): planning and the read-back
 * ask for the same headers and tables, and each system call through Node costs microseconds.
 *
 * The first read within the first block reads all of it (the ELF header, the program headers and, in
 * most files, what follows them): the one read every file gets, ELF or not.
 */
export class FileByteSource implements ByteSource {
  readonly path: string;
  /** The open file's stat, taken when it was opened: reads are checked against its size. */
  readonly stats: Stats;
  readonly size: number;
  bytesRead: number;
  private readonly fd: number;
  /** Blocks read so far, in the order read (KEPT_BLOCKS at most). */
  private readonly kept: { readonly position: number; readonly bytes: Uint8Array }[] = [];

  /** For FileHead.statNow and open. */
  constructor(path: string, fd: number, stats: Stats, bytesRead: number) {
    this.path = path;
    this.fd = fd;
    this.stats = stats;
    this.size = stats.size;
    this.bytesRead = bytesRead;
  }

  /**
   * Opens a regular file for reading and takes its stat, which refuses anything that is not a regular
   * file before a single byte is read. `followLink` false refuses a path that is a symbolic link.
   */
  static open(path: string, options: { followLink?: boolean } = {}): FileByteSource {
    const fd = openDescriptor(path, options.followLink !== false);
    let stats: Stats;
    try {
      stats = statOfDescriptor(fd, path);
    } catch (error) {
      closeSync(fd);
      throw error;
    }
    return new FileByteSource(path, fd, stats, 0);
  }

  /** The first block, kept whole for an ELF file (the ELF header and program headers most often lie in it). */
  private readHead(end: number): Uint8Array {
    const { head, length } = readFirstBlock(this.fd, this.path, end, true);
    this.bytesRead += length;
    this.kept.push({ position: 0, bytes: head });
    return head;
  }

  async read(position: number, length: number, what: string): Promise<Uint8Array> {
    checkRange(this.size, position, length, what);
    const end = position + length;
    for (const range of this.kept) {
      if (position >= range.position && end <= range.position + range.bytes.length)
        return range.bytes.subarray(position - range.position, end - range.position);
    }
    if (length === 0) return new Uint8Array(0);
    if (this.kept.length === 0 && end <= BLOCK) {
      const head = this.readHead(end);
      if (head.length < end) throw malformedInput(`${what}: the file shrank while it was read`, head.length);
      return head.subarray(position, end);
    }
    if (length > KEPT_READ || this.kept.length >= KEPT_BLOCKS) return this.readAround(position, length, what);
    const blockStart = position - (position % BLOCK);
    const blockEnd = Math.min(this.size, Math.ceil(end / BLOCK) * BLOCK);
    const buffer = this.readAround(blockStart, blockEnd - blockStart, what);
    this.kept.push({ position: blockStart, bytes: buffer });
    return buffer.subarray(position - blockStart, end - blockStart);
  }

  /**
   * `length` bytes at `position`: what the kept blocks hold of them is copied from there, and only the
   * rest is read from the file. A large read (a string or symbol table) often spans blocks read before,
   * by this opening or by the one whose seed it adopted: no byte is read from the file twice.
   */
  private readAround(position: number, length: number, what: string): Uint8Array {
    const end = position + length;
    const overlapping = this.kept
      .filter((block) => block.position < end && position < block.position + block.bytes.length)
      .sort((a, b) => a.position - b.position);
    // Not zero-filled first (string and symbol tables reach tens of MiB): every byte is read or copied
    // into, or the read fails. A plain Uint8Array, whose slice() copies (callers that modify what they
    // read take such a copy; a Buffer's would not be one).
    const buffer = readBuffer(length);
    let done = position;
    for (const block of overlapping) {
      const blockEnd = block.position + block.bytes.length;
      if (blockEnd <= done) continue;
      const from = Math.max(block.position, done);
      if (from > done) this.readInto(buffer, position, done, from, what);
      const to = Math.min(blockEnd, end);
      buffer.set(block.bytes.subarray(from - block.position, to - block.position), from - position);
      done = to;
    }
    if (done < end) this.readInto(buffer, position, done, end, what);
    return buffer;
  }

  /** Reads the file's bytes [from, to) into `buffer`, which holds the file's bytes from `base` on. */
  private readInto(buffer: Uint8Array, base: number, from: number, to: number, what: string): void {
    for (let at = from; at < to; ) {
      let bytesRead: number;
      try {
        bytesRead = readSync(this.fd, buffer, at - base, to - at, at);
      } catch (error) {
        throw ioError(this.path, 'read', error);
      }
      if (bytesRead === 0) throw malformedInput(`${what}: the file shrank while it was read`, at);
      at += bytesRead;
    }
    this.bytesRead += to - from;
  }

  /**
   * What this opening read and kept so far, with the identity of the file it read (see ReadSeed): the
   * blocks when they come to `maxBytes` at most, none otherwise (a caller's memory budget, spent).
   */
  seed(maxBytes: number): ReadSeed {
    const size = this.kept.reduce((sum, { bytes }) => sum + bytes.length, 0);
    const blocks = size <= maxBytes ? this.kept.map(({ position, bytes }) => ({ position, bytes: bytes.slice() })) : [];
    return { identity: identityOf(this.stats), blocks };
  }

  /**
   * Serves the reads `seed` holds from memory when the file opened now is the one the seed was read
   * from (same inode, size, modification and change times), before anything else was read; returns
   * whether it did. A file changed in between is read again, as it is now.
   */
  adoptSeed(seed: ReadSeed): boolean {
    if (this.kept.length > 0 || !sameIdentity(identityOf(this.stats), seed.identity)) return false;
    this.kept.push(...seed.blocks.slice(0, KEPT_BLOCKS));
    return true;
  }

  close(): void {
    closeSync(this.fd);
  }
}

/** What tells a file apart from the same path changed or replaced: a write changes its modification or change time. */
export interface FileIdentity {
  readonly dev: number;
  readonly ino: number;
  readonly size: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
}

function identityOf(stats: Stats): FileIdentity {
  return { dev: stats.dev, ino: stats.ino, size: stats.size, mtimeMs: stats.mtimeMs, ctimeMs: stats.ctimeMs };
}

function sameIdentity(a: FileIdentity, b: FileIdentity): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs && a.ctimeMs === b.ctimeMs;
}

/**
 * What one opening of a file read, to serve a later opening of the same file without reading it again:
 * the file's identity when it was read, and the blocks it kept, each an array of its own (plain data, as
 * sent to worker threads: a view into a shared slab would carry the whole slab with it).
 */
export interface ReadSeed {
  readonly identity: FileIdentity;
  readonly blocks: readonly { readonly position: number; readonly bytes: Uint8Array }[];
}

/** Runs `work` on the regular file at `path`, open for positional reads, and closes it; errors name the file. */
export async function withFileByteSource<T>(path: string, work: (source: FileByteSource) => Promise<T>): Promise<T> {
  const source = FileByteSource.open(path);
  try {
    return await work(source);
  } catch (error) {
    throw error instanceof CudaPatchelfError ? error.withFile(path) : error;
  } finally {
    source.close();
  }
}
