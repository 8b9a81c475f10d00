// A string table (.dynstr, .shstrtab) read on demand: a lookup reads only the bytes up to the
// string's NUL, until reading string by string would cost more than reading the table once.

import type { ByteSource } from './byte-source.js';
import { bytesToByteString, sliceByteString, type ByteString } from './byte-string.js';
import { malformedInput } from '../errors/cuda-patchelf-error.js';

/** First read for one string; most runpaths and sonames fit, longer ones read on in doubling chunks. */
const FIRST_CHUNK = 256;
/** Tables up to this size are read whole on first use: one read instead of one per string. */
const READ_WHOLE_UP_TO = 16 * 1024;

export class StringTable {
  readonly offset: number;
  readonly size: number;
  private readonly source: ByteSource;
  private readonly what: string;
  private readonly cache = new Map<number, Promise<ByteString>>();
  private whole: Promise<Uint8Array> | null = null;
  /** Bytes read string by string so far: past the table's size, the table is read whole instead. */
  private spent = 0;
  /**
   * Decoded strings by the index of their NUL. Strings that end at the same NUL (the linker shares
   * tails) are slices of one decoded string, so a hostile table with many entries pointing into one
   * long string costs that string once.
   */
  private readonly byEnd = new Map<number, { start: number; text: ByteString }>();

  constructor(source: ByteSource, offset: number, size: number, what: string) {
    this.source = source;
    this.offset = offset;
    this.size = size;
    this.what = what;
  }

  /** The NUL-terminated byte string at `index` (an offset into the table). */
  get(index: number): Promise<ByteString> {
    let found = this.cache.get(index);
    if (found === undefined) {
      found = this.readString(index);
      this.cache.set(index, found);
    }
    return found;
  }

  /** The whole table, for copying it elsewhere (read once, then kept). */
  readAll(): Promise<Uint8Array> {
    this.whole ??= this.source.read(this.offset, this.size, this.what);
    return this.whole;
  }

  private async readString(index: number): Promise<ByteString> {
    if (!Number.isSafeInteger(index) || index < 0 || index >= this.size) {
      throw malformedInput(`string index ${index} is outside the ${this.what} (size ${this.size})`, this.offset);
    }
    const parts: Uint8Array[] = [];
    let at = index;
    for (let chunk = FIRST_CHUNK; at < this.size; chunk *= 2) {
      // Charged before the read, so that many lookups started at once see the budget run out.
      if (this.size <= READ_WHOLE_UP_TO || this.whole !== null || this.spent >= this.size)
        return this.fromTable(await this.readAll(), index);
      const length = Math.min(chunk, this.size - at);
      this.spent += length;
      const bytes = await this.source.read(this.offset + at, length, this.what);
      const nul = bytes.indexOf(0);
      if (nul >= 0) {
        parts.push(bytes.subarray(0, nul));
        return bytesToByteString(Buffer.concat(parts));
      }
      parts.push(bytes);
      at += length;
    }
    throw this.unterminated(index);
  }

  private fromTable(table: Uint8Array, index: number): ByteString {
    const end = table.indexOf(0, index);
    if (end < 0) throw this.unterminated(index);
    const known = this.byEnd.get(end);
    if (known !== undefined && known.start <= index) return sliceByteString(known.text, index - known.start);
    const text = bytesToByteString(table.subarray(index, end));
    this.byEnd.set(end, { start: index, text });
    return text;
  }

  private unterminated(index: number): Error {
    return malformedInput(`string at index ${index} of the ${this.what} has no NUL terminator`, this.offset + index);
  }
}

/** The NUL-terminated byte string at `index` of a table held in memory. */
export function stringAt(table: Uint8Array, index: number, what = 'dynamic string table', fileOffset?: number): ByteString {
  if (!Number.isSafeInteger(index) || index < 0 || index >= table.length) {
    throw malformedInput(`string index ${index} is outside the ${what} (size ${table.length})`, fileOffset);
  }
  const nul = table.indexOf(0, index);
  if (nul < 0)
    throw malformedInput(
      `string at index ${index} of the ${what} has no NUL terminator`,
      fileOffset === undefined ? undefined : fileOffset + index,
    );
  return bytesToByteString(table.subarray(index, nul));
}
