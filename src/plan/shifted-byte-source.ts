// The bytes of a file moved `shift` bytes further, zeros before them: what a whole-file rewrite starts
// from (src/plan/shift-for-rewrite.ts), read without writing anything.

import { type ByteSource, checkRange } from '../elf/elf.js';

export class ShiftedByteSource implements ByteSource {
  readonly size: number;
  private readonly base: ByteSource;
  private readonly shift: number;

  constructor(base: ByteSource, shift: number) {
    this.base = base;
    this.shift = shift;
    this.size = base.size + shift;
  }

  async read(position: number, length: number, what: string): Promise<Uint8Array> {
    checkRange(this.size, position, length, what);
    if (position >= this.shift) return this.base.read(position - this.shift, length, what);
    const out = new Uint8Array(length);
    const zeros = Math.min(length, this.shift - position);
    if (zeros < length) out.set(await this.base.read(0, length - zeros, what), zeros);
    return out;
  }
}
