// Every place outside the dynamic array that refers into the dynamic string table: symbol names
// (.dynsym, dynamic-symbols.ts), version needs and version definitions (version-records.ts). A
// string's bytes may only be reused or cleared when nothing here points into them (the linker shares
// string tails).

import { locateDynamicSymbols, type DynamicSymbolTable } from './dynamic-symbols.js';
import type { ElfImage } from './elf-image.js';
import type { Section } from './section-headers.js';
import { readVersionRecords } from './version-records.js';

/** A version record's reference into the dynamic string table. */
export interface StringReference {
  /** Index into the dynamic string table. */
  readonly index: number;
  readonly source: 'version-need-file' | 'version-need-name' | 'version-definition';
  /** File offset of the 4-byte field that holds the index (so a rename can rewrite it). */
  readonly fieldOffset: number;
}

export interface StringReferences {
  /**
   * The st_name of every .dynsym entry: tens of thousands in big libraries, so a typed array. Null
   * until read (readDynamicSymbols): a plan needs them only to tell which strings stay referenced,
   * when one is released or zeroed slack is searched.
   */
  readonly symbolNames: Uint32Array | null;
  readonly versionRecords: readonly StringReference[];
  /** Where .dynsym is (checked to lie inside the file); null when the file has none. */
  readonly dynamicSymbols: DynamicSymbolTable | null;
}

/**
 * The version records, and where .dynsym lies (its entries are not read: readDynamicSymbols).
 * `sections`: the file's section headers, already read by the caller (the symbol count may need them).
 */
export async function readStringReferences(image: ElfImage, sections: readonly Section[]): Promise<StringReferences> {
  const versionRecords = await readVersionRecords(image);
  return { symbolNames: null, versionRecords, dynamicSymbols: await locateDynamicSymbols(image, sections) };
}
