// The bytes appended at the end of the file, laid out item by item with their alignments.

export class AppendedRegion {
  /** The file offset where the region starts (the old end of the file). */
  readonly start: number;
  private end: number;
  private readonly parts: { offset: number; bytes: Uint8Array }[] = [];

  constructor(start: number) {
    this.start = start;
    this.end = start;
  }

  /** Reserves `size` bytes aligned to `align`; returns their file offset. */
  reserve(size: number, align: number): number {
    const offset = alignUp(this.end, align);
    this.end = offset + size;
    return offset;
  }

  /** Fills reserved bytes. */
  fill(offset: number, bytes: Uint8Array): void {
    this.parts.push({ offset, bytes });
  }

  get size(): number {
    return this.end - this.start;
  }

  get endOffset(): number {
    return this.end;
  }

  /** The region's bytes, alignment gaps zeroed. */
  bytes(): Uint8Array {
    const out = new Uint8Array(this.end - this.start);
    for (const part of this.parts) out.set(part.bytes, part.offset - this.start);
    return out;
  }
}

export function alignUp(value: number, align: number): number {
  return align <= 1 ? value : Math.ceil(value / align) * align;
}
