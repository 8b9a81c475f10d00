// What the edit operations ask of the planner: the dynamic array, and the interpreter path, as they should end up.

import type { ByteString } from '../elf/elf.js';

/** An entry kept as it is (its value is not a new string). */
export interface KeptEntry {
  readonly d_tag: number;
  readonly d_val: number;
}

/** An entry whose value is a string the planner must place in the dynamic string table. */
export interface StringEntry {
  readonly d_tag: number;
  readonly text: ByteString;
  /** The table index of the string this entry replaces: its bytes may be reused in place. */
  readonly previous: number | null;
}

export type WantedEntry = KeptEntry | StringEntry;

export interface WantedDynamic {
  /** The live entries, in order (the terminating DT_NULL is implied). */
  readonly entries: readonly WantedEntry[];
  /** DT_NEEDED renames that the version needs (.gnu.version_r vn_file) must follow, old → new. */
  readonly versionNeedRenames: ReadonlyMap<ByteString, ByteString>;
  /** The interpreter path (PT_INTERP) as it should be, a byte string; null for a file without one. */
  readonly interpreter: ByteString | null;
}

export function isStringEntry(entry: WantedEntry): entry is StringEntry {
  return 'text' in entry;
}
