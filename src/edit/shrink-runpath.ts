// patchelf --shrink-rpath: keep only the runpath directories that hold a needed library of the same
// machine (relative entries such as $ORIGIN are always kept), optionally only under allowed prefixes.

import { asciiByteString, type ByteString, byteStringToText, concatByteStrings, ElfFile, joinRunpath, splitRunpath } from '../elf/elf.js';

const SLASH = asciiByteString('/');

/** The e_machine of the ELF file at `path`; null for a file that is missing, not ELF or unreadable. */
async function machineOf(path: string): Promise<number | null> {
  const opened = await ElfFile.open(path);
  if (opened.kind !== 'elf') return null;
  opened.file.close();
  return opened.file.header.e_machine;
}

export async function shrinkRunpath(
  runpath: ByteString | null,
  needed: readonly ByteString[],
  machine: number,
  allowedPrefixes: readonly ByteString[],
): Promise<ByteString> {
  const found = new Set<ByteString>();
  const kept: ByteString[] = [];
  for (const dir of splitRunpath(runpath)) {
    // An empty entry means the current directory to the loader; patchelf drops it.
    if (dir === '') continue;
    if (!dir.startsWith('/')) {
      kept.push(dir);
      continue;
    }
    if (allowedPrefixes.length > 0 && !allowedPrefixes.some((prefix) => dir.startsWith(prefix))) continue;
    let useful = false;
    for (const library of needed) {
      if (found.has(library)) continue;
      if ((await machineOf(byteStringToText(concatByteStrings(dir, SLASH, library)))) === machine) {
        found.add(library);
        useful = true;
      }
    }
    if (useful) kept.push(dir);
  }
  return joinRunpath(kept);
}
