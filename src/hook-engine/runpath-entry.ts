// Runpath entries as people spell them and as the loader reads them. The loader treats `/a//b/` and
// `/a/b` as one directory, so the hook engine compares entries in one spelling, and the directories a
// person passes in are checked and brought to that spelling before any file is read.

import {
  asciiByteString,
  type ByteString,
  concatByteStrings,
  joinByteStrings,
  splitByteString,
  textToByteString,
} from '../elf/byte-string.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';

const SLASH = asciiByteString('/');
const DOT = asciiByteString('.');

/** `$ORIGIN` or `${ORIGIN}` at the start of an entry: the directory of the object itself. */
const ORIGIN_PREFIX = /^\$(?:ORIGIN|\{ORIGIN\})(?=\/|$)/;

/**
 * One spelling per directory: no doubled slashes, no `.` components, no trailing slash (`/` stays `/`).
 * `..` is kept: it depends on symbolic links, which the loader follows and a string cannot know.
 */
export function normalizeRunpathEntry(entry: ByteString): ByteString {
  if (entry === '') return entry;
  const absolute = entry.startsWith('/');
  const parts = splitByteString(entry, SLASH).filter((part) => part !== '' && part !== '.');
  const joined = joinByteStrings(parts, SLASH);
  return absolute ? concatByteStrings(SLASH, joined) : joined === '' ? DOT : joined;
}

/**
 * A directory a hook adds, from the command line or a config file (`where` names it in errors): an
 * absolute path, or one under `$ORIGIN` where `allowOrigin`. A relative entry would be looked up from
 * the working directory of whatever process loads the file — a place anyone can put a library — and an
 * empty one makes a `/lib`-style path of the directory added under it. Returns the normalised spelling,
 * as the byte string of the text's UTF-8 encoding.
 */
export function hookDirectory(value: string, where: string, allowOrigin: boolean): ByteString {
  const accepted = allowOrigin ? 'an absolute path or one starting with $ORIGIN' : 'an absolute path';
  if (value === '') throw new CudaPatchelfError('usage', `${where} is empty; it must be ${accepted}`);
  if (value.includes(':')) throw new CudaPatchelfError('usage', `${where} "${value}" contains ':', the runpath separator`);
  if (value.includes('\0')) throw new CudaPatchelfError('usage', `${where} contains a NUL byte`);
  if (!value.startsWith('/') && !(allowOrigin && ORIGIN_PREFIX.test(value))) {
    throw new CudaPatchelfError(
      'usage',
      `${where} "${value}" is relative; it must be ${accepted} (a relative runpath entry is searched ` +
        'from the working directory of the process)',
    );
  }
  return normalizeRunpathEntry(textToByteString(value));
}
