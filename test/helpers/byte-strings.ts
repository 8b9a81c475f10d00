// Test inputs for the ELF side, which holds byte strings (src/elf/byte-string.ts): the byte string of a
// text, and values written as ASCII text where the code takes byte strings (ASCII text is its own byte
// string), checked to be ASCII.

import { type ByteString, textToByteString } from '../../src/elf/byte-string.js';

/** The byte string of `text`'s UTF-8 encoding. */
export const bytes = (text: string): ByteString => textToByteString(text);

/** `T` as a test writes it: each ByteString in it as text. */
export type AsText<T> = T extends ByteString
  ? string
  : T extends (...args: never[]) => unknown
    ? T
    : T extends ReadonlyMap<infer K, infer V>
      ? ReadonlyMap<AsText<K>, AsText<V>>
      : T extends readonly (infer E)[]
        ? readonly AsText<E>[]
        : T extends object
          ? { [P in keyof T]: AsText<T[P]> }
          : T;

function checkAscii(value: unknown): void {
  if (typeof value === 'string') {
    // biome-ignore lint/suspicious/noControlCharactersInRegex: NUL to DEL is what ASCII is.
    if (!/^[\x00-\x7f]*$/.test(value)) throw new Error(`not ASCII, give its bytes: ${JSON.stringify(value)}`);
  } else if (Array.isArray(value)) {
    for (const item of value) checkAscii(item);
  } else if (value instanceof Map) {
    for (const [key, item] of value) {
      checkAscii(key);
      checkAscii(item);
    }
  } else if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
    for (const item of Object.values(value)) checkAscii(item);
  }
}

/**
 * `value`, written as ASCII text, as the `T` of byte strings it is: every string in it is checked to be
 * ASCII, whose chars are its UTF-8 bytes, so its byte strings are the text itself.
 */
export function ascii<T>(value: AsText<T>): T {
  checkAscii(value);
  return value as T;
}

/** Chars up to U+00FF as the bytes they number (latin1): a byte string written as its raw bytes ('\xff'). */
export function latin1(chars: string): ByteString {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: every char of one byte is a byte.
  if (!/^[\x00-\xff]*$/.test(chars)) throw new Error(`a char above U+00FF is no byte: ${JSON.stringify(chars)}`);
  return chars as ByteString;
}
