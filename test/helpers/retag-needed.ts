// Dynamic entries no linker writes, made from ones patchelf can: a DT_NEEDED given another tag (a
// second DT_RUNPATH or DT_SONAME), or pointed at the empty string. Structures are found with
// malformed.ts's own small decoder, not with the code under test.

import { readFile, writeFile } from 'node:fs/promises';
import { rawLayout, writeUnsigned } from './malformed.js';
import { DT } from '../../src/elf/constants.js';

/**
 * Gives the DT_NEEDED entry naming `name` another tag (or, with `toEmpty`, points it at the string
 * table's first byte, the empty string): the way to make the entries no linker writes.
 */
export async function retagNeeded(file: string, name: string, change: { tag: number } | { toEmpty: true }): Promise<void> {
  const bytes = new Uint8Array(await readFile(file));
  const layout = rawLayout(bytes);
  if (layout.dynamic === null || layout.dynstr === null) throw new Error(`${file}: no dynamic array`);
  const { dynstr } = layout;
  const stringAt = (offset: number): string =>
    Buffer.from(bytes.subarray(dynstr.offset + offset, bytes.indexOf(0, dynstr.offset + offset))).toString('latin1');
  const entry = layout.dynamic.entries.find((e) => e.tag === DT.DT_NEEDED && stringAt(e.val) === name);
  if (entry === undefined) throw new Error(`${file}: no DT_NEEDED ${name}`);
  const word = layout.elfClass === 64 ? 8 : 4;
  if ('tag' in change) writeUnsigned(bytes, entry.at, word, layout.little, change.tag);
  else writeUnsigned(bytes, entry.at + word, word, layout.little, 0);
  await writeFile(file, bytes);
}
