// `.note.dlopen`: the libraries a file may dlopen, as the FDO "dlopen() metadata for ELF files"
// specification (https://systemd.io/ELF_DLOPEN_METADATA/) writes them. Each note has owner "FDO",
// type 0x407c0c0a, and a descriptor holding a JSON array of objects, zero-terminated and zero-padded;
// each object's `soname` array lists alternatives, the preferred first, with the `priority` of the
// dependency and the `feature` it serves. Other keys (`description`, and any later ones) are not read.
// The notes themselves come from the ELF reader's one note walker (notes.ts); this is what a descriptor
// means, for the resolver (the names) and doctor (the names and their priority) alike. Bad input comes
// back as a value naming what is wrong, never as an exception.

import { asciiByteString, type ByteString, textToByteString } from './byte-string.js';
import { noteJson } from './note-json.js';

/** NT_FDO_DLOPEN_METADATA (glibc elf.h). */
const NT_FDO_DLOPEN_METADATA = 0x407c0c0a;
const FDO_OWNER = asciiByteString('FDO');

/** One dependency: the names that can satisfy it, in order of preference (byte strings). */
export type DlopenDependency = readonly ByteString[];

/** One entry of a note: a dependency, how much the file wants it, and what for. */
export interface DlopenEntry {
  /** The names that can satisfy it, in order of preference, as byte strings (the UTF-8 of the JSON text), as DT_NEEDED names are. */
  readonly sonames: DlopenDependency;
  /** required, recommended or suggested: the text of the key, else the specification's default, recommended. */
  readonly priority: string;
  readonly feature: string | null;
}

export type DlopenDescriptor =
  | { readonly ok: true; readonly entries: readonly DlopenEntry[] }
  | { readonly ok: false; readonly error: string };

/** The dlopen entries of a file, and a line for each FDO dlopen note that could not be read. */
export interface DlopenNotes {
  readonly entries: readonly DlopenEntry[];
  readonly malformed: readonly string[];
}

/** A note as the ELF reader gives it (src/elf/notes.ts walks the note segments and sections). */
interface Note {
  /** The owner's name without its NUL, as a byte string. */
  readonly owner: ByteString;
  readonly type: number;
  readonly descriptor: Uint8Array;
}

/**
 * The entries of a file's FDO dlopen notes, in note order; notes of other owners or types are not
 * ours. A note whose descriptor cannot be read is reported in `malformed` (numbered among the FDO
 * dlopen notes, from 1) and ignored whole; the others still count.
 */
export function dlopenNotes(notes: readonly Note[]): DlopenNotes {
  const entries: DlopenEntry[] = [];
  const malformed: string[] = [];
  const fdoNotes = notes.filter((note) => note.type === NT_FDO_DLOPEN_METADATA && note.owner === FDO_OWNER);
  for (const [index, note] of fdoNotes.entries()) {
    const descriptor = parseDlopenDescriptor(note.descriptor);
    if (descriptor.ok) entries.push(...descriptor.entries);
    else malformed.push(`.note.dlopen note ${index + 1}: ${descriptor.error}`);
  }
  return { entries, malformed };
}

/**
 * One FDO dlopen descriptor: a zero-terminated UTF-8 JSON array of objects, each with a non-empty
 * `soname` array of non-empty strings. The text ends at the first NUL (the zero padding after it is not
 * JSON); a descriptor without one is read whole.
 */
export function parseDlopenDescriptor(descriptor: Uint8Array): DlopenDescriptor {
  const end = descriptor.indexOf(0);
  const parsed = noteJson(descriptor.subarray(0, end < 0 ? descriptor.length : end), 'the descriptor');
  if (!parsed.ok) return { ok: false, error: parsed.problem };
  const { json } = parsed;
  if (!Array.isArray(json)) return { ok: false, error: 'the JSON is not an array' };
  const entries: DlopenEntry[] = [];
  for (const [index, entry] of json.entries()) {
    const sonames = sonamesOf(entry);
    if (typeof sonames === 'string') return { ok: false, error: `entry ${index}: ${sonames}` };
    const { priority, feature } = entry as Record<string, unknown>;
    entries.push({
      sonames: sonames.map(textToByteString),
      priority: typeof priority === 'string' ? priority : 'recommended',
      feature: typeof feature === 'string' ? feature : null,
    });
  }
  return { ok: true, entries };
}

/** An entry's `soname` array, or what is wrong with the entry. */
function sonamesOf(entry: unknown): readonly string[] | string {
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return 'not a JSON object';
  const sonames: unknown = (entry as Record<string, unknown>).soname;
  if (!Array.isArray(sonames)) return 'no "soname" array';
  if (sonames.length === 0) return 'an empty "soname" array';
  if (!sonames.every((soname): soname is string => typeof soname === 'string' && soname !== '')) {
    return 'a "soname" that is not a non-empty string';
  }
  return sonames;
}
