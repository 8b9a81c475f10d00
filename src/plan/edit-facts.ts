// The planner's input: everything it needs to know about a file, read up front (by
// src/edit/read-edit-facts.ts) so that planning itself is pure.

import {
  type ByteString,
  type DynamicArray,
  type ElfCodec,
  type ElfHeader,
  type ProgramHeader,
  type Section,
  STRING_TAGS,
  stringAt,
  type StringReferences,
} from '../elf/elf.js';

export interface DynamicStringTable {
  readonly offset: number;
  readonly vaddr: number;
  readonly bytes: Uint8Array;
}

/** PT_INTERP: the interpreter path the kernel reads at p_offset, as planning needs it. */
export interface InterpreterFact {
  /** The index of PT_INTERP in the program header table. */
  readonly index: number;
  readonly offset: number;
  readonly vaddr: number;
  /** p_filesz: the path, its NUL, and any zeros after it. */
  readonly size: number;
  /** The path, as a byte string (without the NUL). */
  readonly text: ByteString;
  /**
   * The bytes from p_offset that a new path may take in place: p_filesz when every byte after the
   * path's NUL is zero (room an earlier, longer path left), else the path and its NUL.
   */
  readonly room: number;
}

/** A file range that the program header table may grow over once its bytes are copied elsewhere. */
export interface MovableRange {
  readonly offset: number;
  readonly bytes: Uint8Array;
}

export interface EditFacts {
  readonly fileSize: number;
  readonly codec: ElfCodec;
  readonly header: ElfHeader;
  readonly programHeaders: readonly ProgramHeader[];
  readonly dynamic: DynamicArray;
  readonly dynstr: DynamicStringTable;
  /** References into .dynstr from outside the dynamic array. */
  readonly references: StringReferences;
  readonly sections: readonly Section[];
  /** PT_INTERP, null without one (a library, a static program). */
  readonly interpreter: InterpreterFact | null;
  /** The bytes of PT_INTERP and PT_NOTE ranges (what may be moved to make room after the table). */
  readonly movableRanges: readonly MovableRange[];
  /** Sections right after the program header table that a RELOCATABLE_SECTION_TAGS tag points at. */
  readonly relocatableSections: readonly MovableRange[];
  /** The bytes of one more program header right after the table (fewer where the file ends): its gap check. */
  readonly afterProgramHeaders: Uint8Array;
  /**
   * The static symbol table (.symtab), whose symbols in a moved section must follow it; null if none.
   * Its bytes are null until read: only a plan that moves sections asks for them.
   */
  readonly symbolTable: { readonly offset: number; readonly size: number; readonly bytes: Uint8Array | null } | null;
  /**
   * The largest st_size among the .dynsym entries (0 without any): how far past its address a symbol
   * reaches, and a relocation against it (a copy relocation writes that many bytes). A new segment
   * starts that far above every segment (segment-layout.ts). Null until read, with the names.
   */
  readonly largestSymbolSize: number | null;
}

/** Facts a first reading leaves out, read when a plan asks for them (NeedsFacts). */
export type LaterFact = 'dynamic-symbols' | 'symbol-table';

/** The current entries with their strings resolved, as the edit operations see them. */
export interface CurrentEntry {
  readonly d_tag: number;
  readonly d_val: number;
  /** The string for string-valued tags, null otherwise. */
  readonly text: ByteString | null;
}

export function currentEntries(facts: Pick<EditFacts, 'dynamic' | 'dynstr'>): CurrentEntry[] {
  return facts.dynamic.entries.map((entry) => ({
    d_tag: entry.d_tag,
    d_val: entry.d_val,
    text: STRING_TAGS.has(entry.d_tag) ? stringAt(facts.dynstr.bytes, entry.d_val) : null,
  }));
}
