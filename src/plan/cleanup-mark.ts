// The mark of a cleanup under way. A plan zeroes the strings it frees after its switch (the `cleanup`
// phase, plan.ts): a run killed in between leaves a file that loads and reads as edited, with the
// replaced string still in it for Nix's scan to find. An edit that moves the string table leaves a
// stale .dynstr section header behind to show it (resume-edit.ts); an in-place edit, or any edit of
// a file without section headers, leaves nothing that differs from a finished edit. So the plan marks
// the dynamic array itself: every DT_NULL entry's d_val, which the gABI says is ignored and no loader
// reads, holds CLEANUP_MARK from before the switch until the cleanup is done. Every DT_NULL slot, not
// only the terminator: the kernel may stop a write at a page boundary for a fatal signal, and a
// switch cut there has its first DT_NULL wherever the cut puts it, each one marked all the same.

import { DYN, type DynamicArray, type DynamicEntry, type ElfCodec } from '../elf/elf.js';

/** The d_val of every DT_NULL slot of a dynamic array while its cleanup is under way (0 otherwise). */
export const CLEANUP_MARK = 1;

/**
 * `array` (the bytes of a dynamic array whose first `live` entries are live) with the d_val of every
 * slot after them set to `value`: a copy, so that the live entries keep their bytes as they are.
 */
export function withNullValues(codec: ElfCodec, array: Uint8Array, live: number, value: number): Uint8Array {
  const bytes = array.slice();
  const size = codec.sizeOf(DYN);
  for (let at = live * size; at + size <= bytes.length; at += size) codec.encode(DYN, { d_val: value }, bytes, at);
  return bytes;
}

/** `entries` in `slots` slots, the DT_NULL slots after them holding `nullValue`. */
export function encodeDynamicArray(codec: ElfCodec, entries: readonly DynamicEntry[], slots: number, nullValue: number): Uint8Array {
  return withNullValues(codec, codec.encodeRecords(DYN, entries, slots), entries.length, nullValue);
}

/**
 * Whether a run was cut short between marking this array and clearing the mark: its terminator holds
 * the mark. Any other value is no mark of ours (none of 2,324 real files has one; a damaged file may),
 * and is left alone.
 */
export function cleanupMarked(codec: ElfCodec, dynamic: DynamicArray): boolean {
  const size = codec.sizeOf(DYN);
  const at = dynamic.entries.length * size;
  return at + size <= dynamic.bytes.length && codec.decode(DYN, dynamic.bytes, at).d_val === CLEANUP_MARK;
}
