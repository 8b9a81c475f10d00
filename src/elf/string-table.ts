// A string table (.dynstr) read on demand: each lookup reads only the bytes up to the string's NUL.

import type { ByteSource } from './byte-source.js';
import { bytesToByteString } from './byte-string.js';
import { formatError } from '../errors/cuda-patchelf-error.js';

/** First read for one string; most runpaths and sonames fit, longer ones read on in doubling chunks. */
const FIRST_CHUNK = 256;
/** Tables up to this size are read whole on first use: one read instead of one per string. */
const READ_WHOLE_UP_TO = 16 * 1024;

export class StringTable {
  readonly offset: number;
  readonly size: number;
  private readonly source: ByteSource;
  private readonly what: string;
  private readonly cache = new Map<number, Promise<string>>();
  private whole: Promise<Uint8Array> | null = null;

  constructor(source: ByteSource, offset: number, size: number, what: string) {
    this.source = source;
    this.offset = offset;
    this.size = size;
    this.what = what;
  }

  /** The NUL-terminated byte string at `index` (an offset into the table). */
  get(index: number): Promise<string> {
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

  private async readString(index: number): Promise<string> {
    if (!Number.isSafeInteger(index) || index < 0 || index >= this.size) {
      throw formatError(`string index ${index} is outside the ${this.what} (size ${this.size})`, this.offset);
    }
    if (this.size <= READ_WHOLE_UP_TO || this.whole !== null) {
      return stringAt(await this.readAll(), index, this.what);
    }
    const parts: Uint8Array[] = [];
    let at = index;
    for (let chunk = FIRST_CHUNK; at < this.size; chunk *= 2) {
      const length = Math.min(chunk, this.size - at);
      const bytes = await this.source.read(this.offset + at, length, this.what);
      const nul = bytes.indexOf(0);
      if (nul >= 0) {
        parts.push(bytes.subarray(0, nul));
        return bytesToByteString(Buffer.concat(parts));
      }
      parts.push(bytes);
      at += length;
    }
    throw formatError(`string at index ${index} of the ${this.what} has no NUL terminator`, this.offset + index);
  }
}

/** The NUL-terminated byte string at `index` of a table held in memory. */
export function stringAt(table: Uint8Array, index: number, what = 'dynamic string table'): string {
  if (!Number.isSafeInteger(index) || index < 0 || index >= table.length) {
    throw formatError(`string index ${index} is outside the ${what} (size ${table.length})`);
  }
  const nul = table.indexOf(0, index);
  if (nul < 0) throw formatError(`string at index ${index} of the ${what} has no NUL terminator`);
  return bytesToByteString(table.subarray(index, nul));
}
