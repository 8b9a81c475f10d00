// A ByteSource over bytes already in memory, so the reader can be driven without a file: mutation runs
// read thousands of variants of a file and must not touch the disk for each.

import { checkRange, type ByteSource } from '../../src/elf/byte-source.js';

export class MemoryByteSource implements ByteSource {
  readonly size: number;
  bytesRead = 0;
  reads = 0;
  private readonly bytes: Uint8Array;

  constructor(bytes: Uint8Array) {
    this.bytes = bytes;
    this.size = bytes.length;
  }

  async read(position: number, length: number, what: string): Promise<Uint8Array> {
    checkRange(this.size, position, length, what);
    this.reads++;
    this.bytesRead += length;
    // A copy, as a file read would give: the reader must not see later changes to the buffer.
    return this.bytes.slice(position, position + length);
  }
}
