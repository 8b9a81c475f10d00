// patchelf --shrink-rpath: keep only the runpath directories that hold a needed library of the same
// machine (relative entries such as $ORIGIN are always kept), optionally only under allowed prefixes.

import { byteStringToText, ElfFile, joinRunpath, splitRunpath } from '../elf/elf.js';

/** The e_machine of the ELF file at `path`; null for a file that is missing, not ELF or unreadable. */
async function machineOf(path: string): Promise<number | null> {
  const opened = await ElfFile.open(path);
  if (opened.kind !== 'elf') return null;
  opened.file.close();
  return opened.file.header.e_machine;
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
