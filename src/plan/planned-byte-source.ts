// The bytes a file will have once a plan is applied, without writing it: the file's own bytes with the
// plan's writes laid over them in order (appended bytes past the old end, holes as zeros). The planner
// reads its result back through this before a single byte is written.

import { type ByteSource, checkRange } from '../elf/elf.js';

export interface OverlayWrite {
  readonly offset: number;
  readonly bytes: Uint8Array;
}

export class PlannedByteSource implements ByteSource {
  readonly size: number;
  private readonly base: ByteSource;
  private readonly writes: readonly OverlayWrite[];

  constructor(base: ByteSource, writes: readonly OverlayWrite[], size: number) {
    this.base = base;
    this.writes = writes;
    this.size = size;
  }

  async read(position: number, length: number, what: string): Promise<Uint8Array> {
    checkRange(this.size, position, length, what);
    const end = position + length;
    // Most reads fall outside every write: the file's own bytes then serve as they are, uncopied.
    if (end <= this.base.size && !this.writes.some((write) => write.offset < end && position < write.offset + write.bytes.length)) {
      return this.base.read(position, length, what);
    }
    const covering = this.onlyWriteCovering(position, end);
    if (covering !== null) return covering.bytes.subarray(position - covering.offset, end - covering.offset);
    const out = new Uint8Array(length);
    const fromBase = Math.max(0, Math.min(length, this.base.size - position));
    if (fromBase > 0) out.set(await this.base.read(position, fromBase, what));
    for (const write of this.writes) {
      const start = Math.max(position, write.offset);
      const end = Math.min(position + length, write.offset + write.bytes.length);
      if (start < end) out.set(write.bytes.subarray(start - write.offset, end - write.offset), start - position);
    }
    return out;
  }

  /**
   * The write that holds all of [position, end) when no later write touches the range: the bytes are
   * then that write's own (a moved table read back is one such range, often the largest read).
   */
  private onlyWriteCovering(position: number, end: number): OverlayWrite | null {
    for (let i = this.writes.length - 1; i >= 0; i--) {
      const write = this.writes[i];
      if (write === undefined || write.offset >= end || position >= write.offset + write.bytes.length) continue;
      return write.offset <= position && end <= write.offset + write.bytes.length ? write : null;
    }
    return null;
  }
}
