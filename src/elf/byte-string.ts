// Strings from an ELF file are byte strings: one JS char per byte (latin1), so any byte sequence
// survives a read-edit-write round trip. Conversion to and from UTF-8 happens only at the edges
// (command line, printed output, JSON).

/** Up to this length a string is built from char codes: names are short, and a Buffer per name costs more. */
const SHORT_STRING = 64;

/** Bytes (without NUL) → byte string. */
export function bytesToByteString(bytes: Uint8Array): string {
  if (bytes.length <= SHORT_STRING) return String.fromCharCode.apply(null, bytes as unknown as number[]);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
}

/** Byte string → bytes (without NUL). */
export function byteStringToBytes(value: string): Uint8Array {
  return Buffer.from(value, 'latin1');
}

/** A byte string as text for people: its bytes decoded as UTF-8 (invalid sequences become U+FFFD). */
export function byteStringToText(value: string): string {
  return Buffer.from(value, 'latin1').toString('utf8');
}

/** Text from a person (argv, a config file) → the byte string of its UTF-8 encoding. */
export function textToByteString(value: string): string {
  return Buffer.from(value, 'utf8').toString('latin1');
}
