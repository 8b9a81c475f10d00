// `.note.dlopen`: the libraries a file may dlopen, as the FDO "dlopen() metadata for ELF files"
// specification (https://systemd.io/ELF_DLOPEN_METADATA/) writes them. Each note has owner "FDO",
// type 0x407c0c0a, and a descriptor holding a JSON array of objects, zero-terminated and zero-padded;
// each object's `soname` array lists alternatives, the preferred first. Other keys (`feature`,
// `description`, `priority`, and any later ones) are not ours to read: the resolver wants the names.
// Bad input comes back as a value naming what is wrong, never as an exception.

import { bytesToByteString, textToByteString } from '../elf/byte-string.js';

/** NT_FDO_DLOPEN_METADATA (glibc elf.h). */
const NT_FDO_DLOPEN_METADATA = 0x407c0c0a;
const FDO_OWNER = 'FDO';
/** n_namesz, n_descsz, n_type: three 4-byte words in the file's byte order, whatever its class. */
const NOTE_HEADER_SIZE = 12;

/** One dependency: the names that can satisfy it, in order of preference (byte strings). */
export type DlopenDependency = readonly string[];

export type DlopenDescriptor =
  | { readonly ok: true; readonly dependencies: readonly DlopenDependency[] }
  | { readonly ok: false; readonly error: string };

/** The dlopen dependencies of one note area, and a line for each FDO dlopen note that could not be read. */
export interface DlopenNotes {
  readonly dependencies: readonly DlopenDependency[];
  readonly malformed: readonly string[];
}

const alignUp = (value: number, alignment: number): number => Math.ceil(value / alignment) * alignment;

/**
 * The dependencies listed by the FDO dlopen notes among the notes of one PT_NOTE segment or SHT_NOTE
 * section (`bytes`, in the file's byte order). `alignment` is its p_align or sh_addralign: notes are
 * padded to 4 bytes, or to 8 in an 8-aligned area (as readelf reads them; 0 and 1 count as 4). A note
 * that cannot be read is reported in `malformed` and ignored; notes of other owners or types are
 * skipped. A broken note header ends the area: nothing after it can be found.
 */
export function parseDlopenNotes(bytes: Uint8Array, littleEndian: boolean, alignment: number): DlopenNotes {
  if (alignment !== 0 && alignment !== 1 && alignment !== 4 && alignment !== 8) {
    return { dependencies: [], malformed: [`notes aligned to ${alignment} bytes (4 or 8 expected)`] };
  }
  const padding = alignment === 8 ? 8 : 4;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const dependencies: DlopenDependency[] = [];
  const malformed: string[] = [];
  let offset = 0;
  while (offset < bytes.length) {
    if (bytes.length - offset < NOTE_HEADER_SIZE) {
      malformed.push(`note at offset ${offset}: ${bytes.length - offset} bytes left, less than a note header`);
      break;
    }
    const nameSize = view.getUint32(offset, littleEndian);
    const descriptorSize = view.getUint32(offset + 4, littleEndian);
    const type = view.getUint32(offset + 8, littleEndian);
    const nameStart = offset + NOTE_HEADER_SIZE;
    const descriptorStart = alignUp(nameStart + nameSize, padding);
    const descriptorEnd = descriptorStart + descriptorSize;
    if (descriptorEnd > bytes.length) {
      malformed.push(
        `note at offset ${offset}: name (${nameSize} bytes) and descriptor (${descriptorSize} bytes) run past the end (${bytes.length} bytes)`,
      );
      break;
    }
    if (type === NT_FDO_DLOPEN_METADATA && ownerOf(bytes.subarray(nameStart, nameStart + nameSize)) === FDO_OWNER) {
      const descriptor = parseDlopenDescriptor(bytes.subarray(descriptorStart, descriptorEnd));
      if (descriptor.ok) dependencies.push(...descriptor.dependencies);
      else malformed.push(`note at offset ${offset}: ${descriptor.error}`);
    }
    offset = alignUp(descriptorEnd, padding);
  }
  return { dependencies, malformed };
}

/** The owner name: its bytes up to the terminating NUL (n_namesz counts it). */
function ownerOf(name: Uint8Array): string {
  const end = name.indexOf(0);
  return bytesToByteString(name.subarray(0, end < 0 ? name.length : end));
}

/**
 * One FDO dlopen descriptor: a zero-terminated UTF-8 JSON array of objects, each with a non-empty
 * `soname` array of non-empty strings. The text ends at the first NUL (the zero padding after it is not
 * JSON); a descriptor without one is read whole.
 */
export function parseDlopenDescriptor(descriptor: Uint8Array): DlopenDescriptor {
  const end = descriptor.indexOf(0);
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(descriptor.subarray(0, end < 0 ? descriptor.length : end));
  } catch {
    return { ok: false, error: 'the descriptor is not UTF-8 text' };
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return { ok: false, error: `malformed JSON (${(error as Error).message})` };
  }
  if (!Array.isArray(json)) return { ok: false, error: 'the JSON is not an array' };
  const dependencies: DlopenDependency[] = [];
  for (const [index, entry] of json.entries()) {
    const sonames = sonamesOf(entry);
    if (typeof sonames === 'string') return { ok: false, error: `entry ${index}: ${sonames}` };
    dependencies.push(sonames.map(textToByteString));
  }
  return { ok: true, dependencies };
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
