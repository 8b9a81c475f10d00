// patchelf --shrink-rpath: keep only the runpath directories that hold a needed library of the same
// machine (relative entries such as $ORIGIN are always kept), optionally only under allowed prefixes.

import { FileByteSource } from '../elf/byte-source.js';
import { byteStringToText } from '../elf/byte-string.js';
import { readElfImage } from '../elf/elf-image.js';
import { joinRunpath, splitRunpath } from '../elf/runpath-list.js';

async function machineOf(path: string): Promise<number | null> {
  let source: FileByteSource | undefined;
  try {
    source = FileByteSource.open(path);
    return (await readElfImage(source)).header.e_machine;
  } catch {
    return null;
  } finally {
    source?.close();
  }
}

export async function shrinkRunpath(
  runpath: string | null,
  needed: readonly string[],
  machine: number,
  allowedPrefixes: readonly string[],
): Promise<string> {
  const found = new Set<string>();
  const kept: string[] = [];
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
      if ((await machineOf(byteStringToText(`${dir}/${library}`))) === machine) {
        found.add(library);
        useful = true;
      }
    }
    if (useful) kept.push(dir);
  }
  return joinRunpath(kept);
}
