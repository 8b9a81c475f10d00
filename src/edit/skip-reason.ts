// Which readable ELF files the per-file pipeline leaves alone, and why: a decision on what the reader
// found, made here so that `apply`, `print` and doctor decide alike (the reader only reads).

import { DF_1, DT, dynamicValue, type ElfImage, ET } from '../elf/elf.js';

/** Readable ELF files `apply` leaves alone (skipReason). */
export type SkipReason = 'relocatable' | 'core' | 'debug-info' | 'static' | 'static-pie';

/**
 * Why `apply` would leave a readable ELF file alone, or null when it would visit it. A static-pie has
 * a dynamic section (for relocating itself) but no interpreter; glibc's start-up code asserts it has
 * no DT_RUNPATH/DT_RPATH, so giving it one makes it crash before main. A debug-info file has no
 * dynamic array to patch, and nothing ever loads it.
 */
export function skipReason(image: ElfImage): SkipReason | null {
  if (image.header.e_type === ET.ET_REL) return 'relocatable';
  if (image.header.e_type === ET.ET_CORE) return 'core';
  if (image.debugInfo) return 'debug-info';
  if (image.dynamic === null) return 'static';
  const pie = ((dynamicValue(image.dynamic, DT.DT_FLAGS_1) ?? 0) & DF_1.PIE) !== 0;
  if (pie && image.interpreter === null) return 'static-pie';
  return null;
}
