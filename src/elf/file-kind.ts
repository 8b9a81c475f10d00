// What a file is by its first bytes: the one place the ELF and ar magic numbers are compared.

import { AR_MAGIC, ELF_MAGIC } from './constants.js';

export function startsWith(bytes: Uint8Array, prefix: Uint8Array): boolean {
  return bytes.length >= prefix.length && prefix.every((byte, i) => bytes[i] === byte);
}

/** Whether `bytes` start with the whole ELF magic (\x7fELF). */
export function hasElfMagic(bytes: Uint8Array): boolean {
  return startsWith(bytes, ELF_MAGIC);
}

/** Bytes enough to tell the kinds of fileKind apart. */
export const KIND_BYTES = AR_MAGIC.length;

export type FileKind = 'archive' | 'elf' | 'other';

/** An ar archive (a static library), an ELF file, or anything else, by the file's first KIND_BYTES bytes. */
export function fileKind(head: Uint8Array): FileKind {
  if (startsWith(head, AR_MAGIC)) return 'archive';
  return hasElfMagic(head) ? 'elf' : 'other';
}
