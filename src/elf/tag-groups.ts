// Groups of dynamic tags by what their value means: the rewriter treats each group alike.

import { DT } from './constants.js';

/** Tags whose d_val is an index into the dynamic string table. */
export const STRING_TAGS: ReadonlySet<number> = new Set([
  DT.DT_NEEDED,
  DT.DT_SONAME,
  DT.DT_RPATH,
  DT.DT_RUNPATH,
  DT.DT_AUXILIARY,
  DT.DT_FILTER,
  DT.DT_CONFIG,
  DT.DT_DEPAUDIT,
  DT.DT_AUDIT,
]);

/**
 * Tags that point at a section whose only references are that tag and its section header: such a
 * section can be copied into the new segment and the tag switched to the copy. (.dynstr is left out:
 * the string placement edits it where it stands.)
 */
export const RELOCATABLE_SECTION_TAGS: readonly number[] = [
  DT.DT_GNU_HASH,
  DT.DT_HASH,
  DT.DT_SYMTAB,
  DT.DT_VERSYM,
  DT.DT_VERNEED,
  DT.DT_VERDEF,
];

/** Tags whose value is an address in the file's image (what must never be moved over unawares). */
export const ADDRESS_TAGS: readonly number[] = [
  ...RELOCATABLE_SECTION_TAGS,
  DT.DT_STRTAB,
  DT.DT_PLTGOT,
  DT.DT_RELA,
  DT.DT_REL,
  DT.DT_JMPREL,
  DT.DT_INIT,
  DT.DT_FINI,
  DT.DT_INIT_ARRAY,
  DT.DT_FINI_ARRAY,
  DT.DT_PREINIT_ARRAY,
];
