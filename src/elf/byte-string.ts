// Strings from an ELF file are byte strings: one JS char per byte (latin1), so any byte sequence
// survives a read-edit-write round trip. Conversion to and from UTF-8 happens only at the edges
// (command line, printed output, JSON).
//
// A byte string has its own type, ByteString: a string branded so that text (argv, a message, a path
// as Node spells it) is not taken for one without a conversion here, and a byte string is not encoded
// again (textToByteString refuses one). ByteString is still a string (it reads like one: length,
// startsWith, ===), but only the functions below make one: the converters, the byte string of ASCII
// text, and the operations that make a byte string of byte strings (a slice, a join, a concatenation,
// a POSIX path operation), whose result is again one char per byte. Outside this module, only a reader
// that builds strings from a file's bytes may brand them itself, saying why that is sound.

import { posix } from 'node:path';

declare const brand: unique symbol;

/** The bytes of an ELF string (or of a path, a name) as a string of one char per byte: see above. */
export type ByteString = string & { readonly [brand]: 'ByteString' };

/**
 * The parameter type of a function that takes text: a ByteString given to it is a compile error (text
 * made of a byte string is a double encoding). `T` is the argument's own type.
 */
type NotByteString<T extends string> = T & (T extends ByteString ? never : unknown);

/** Up to this length a string is built from char codes: names are short, and a Buffer per name costs more. */
const SHORT_STRING = 64;

// biome-ignore lint/suspicious/noControlCharactersInRegex: NUL to DEL is what ASCII is.
const ASCII = /^[\x00-\x7f]*$/;

/**
 * Whether every char is ASCII: then text and its byte string are one string (each char is its own UTF-8
 * byte and its own latin1 char), and the converters below return it as it is, without a Buffer (most
 * paths and names are ASCII, and the batch converts thousands).
 */
const isAscii = (value: string): boolean => ASCII.test(value);

/** Bytes (without NUL) → byte string. */
export function bytesToByteString(bytes: Uint8Array): ByteString {
  // Sound: each char is one byte's value (0-255), built from bytes.
  if (bytes.length <= SHORT_STRING) return String.fromCharCode.apply(null, bytes as unknown as number[]) as ByteString;
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1') as ByteString;
}

/** Byte string → bytes (without NUL), a Buffer (which Node's fs takes as a path of those bytes). */
export function byteStringToBytes(value: ByteString): Buffer {
  return Buffer.from(value, 'latin1');
}

/** A byte string as text for people: its bytes decoded as UTF-8 (invalid sequences become U+FFFD). */
export function byteStringToText(value: ByteString): string {
  return isAscii(value) ? value : Buffer.from(value, 'latin1').toString('utf8');
}

/** Text from a person (argv, a config file) → the byte string of its UTF-8 encoding. */
export function textToByteString<T extends string>(value: NotByteString<T>): ByteString {
  // Sound: latin1 gives each byte of the UTF-8 encoding one char (ASCII: see isAscii).
  return (isAscii(value) ? value : Buffer.from(value, 'utf8').toString('latin1')) as ByteString;
}

/** The byte string of ASCII text: the text itself (each ASCII char is its UTF-8 byte); text that is not ASCII throws. */
export function asciiByteString<T extends string>(value: NotByteString<T>): ByteString {
  if (!isAscii(value)) throw new Error(`not ASCII: ${JSON.stringify(value)}`);
  // Sound: checked above, every char is below 0x80, so one byte of UTF-8 and of latin1 alike.
  return value as string as ByteString;
}

/** The empty byte string. */
export const EMPTY_BYTE_STRING: ByteString = asciiByteString('');

/** Byte strings one after the other: the bytes of each, in order. */
export function concatByteStrings(...parts: readonly ByteString[]): ByteString {
  let joined = '';
  for (const part of parts) joined += part;
  // Sound: a concatenation of strings of one char per byte is one too.
  return joined as ByteString;
}

/** Byte strings joined by `separator` (e.g. a runpath's entries by ':'). */
export function joinByteStrings(parts: readonly ByteString[], separator: ByteString): ByteString {
  // Sound: as concatByteStrings.
  return parts.join(separator) as ByteString;
}

/** A byte string's fields between each `separator` (String.prototype.split: a byte string, or a pattern). */
export function splitByteString(value: ByteString, separator: ByteString | RegExp): ByteString[] {
  // Sound: a part of a string of one char per byte is one too.
  return value.split(separator) as ByteString[];
}

/** The bytes from `start` up to `end` (String.prototype.slice, whose indices are byte offsets here). */
export function sliceByteString(value: ByteString, start: number, end?: number): ByteString {
  // Sound: as splitByteString.
  return value.slice(start, end) as ByteString;
}

// node:path's POSIX functions read '/' and '.' only (ASCII: one byte, one char) and keep every other
// char as it is: over byte strings, their result is a byte string too.

/** posix.normalize of a byte string path. */
export function normalizeBytePath(path: ByteString): ByteString {
  // Sound: see above.
  return posix.normalize(path) as ByteString;
}

/** posix.dirname of a byte string path. */
export function dirnameBytePath(path: ByteString): ByteString {
  // Sound: see above.
  return posix.dirname(path) as ByteString;
}

/** posix.join of byte string paths. */
export function joinBytePath(...paths: readonly ByteString[]): ByteString {
  // Sound: see above.
  return posix.join(...paths) as ByteString;
}

/** posix.relative from one absolute byte string path to another (a relative one would be resolved from the working directory, which is text). */
export function relativeBytePath(from: ByteString, to: ByteString): ByteString {
  // Sound: see above; both paths are absolute, so the working directory plays no part.
  return posix.relative(from, to) as ByteString;
}
