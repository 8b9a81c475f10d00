// The bytes appended at the end of the file: space reserved item by item with its alignment while
// the layout is made (segment-layout.ts), and the bytes put together once it is (append-writes.ts).

/** Reserves space past `start`, item by item, each at its alignment. */
export class AppendedRegion {
  /** The file offset where the region starts (the old end of the file, or past it). */
  readonly start: number;
  private end: number;

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

  /** The end of the last reservation. */
  get endOffset(): number {
    return this.end;
  }
}

/** Bytes that go at a file offset inside the region. */
export interface RegionPart {
  readonly offset: number;
  readonly bytes: Uint8Array;
}

/** The region [start, end) with each part at its offset, the alignment gaps zeroed. */
export function regionBytes(start: number, end: number, parts: readonly RegionPart[]): Uint8Array {
  const out = new Uint8Array(end - start);
  for (const part of parts) out.set(part.bytes, part.offset - start);
  return out;
}

export function alignUp(value: number, align: number): number {
  return align <= 1 ? value : Math.ceil(value / align) * align;
}
