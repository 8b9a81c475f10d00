// ELF notes: the records of PT_NOTE segments and SHT_NOTE sections, each an owner's name, a type and
// a descriptor (build IDs, ABI tags, the `.note.dlopen` metadata of https://systemd.io/ELF_DLOPEN_METADATA/).

import { dataViewOf } from './byte-source.js';
import { bytesToByteString, byteStringToText, type ByteString } from './byte-string.js';
import { PT, SHT } from './constants.js';
import type { ElfImage } from './elf-image.js';
import { malformedInput } from '../errors/cuda-patchelf-error.js';
import { readSectionHeaders, type Section } from './section-headers.js';

/** A note segment or section larger than this is not read (real ones are a few hundred bytes). */
const LARGEST_NOTES = 1024 * 1024;
/** namesz, descsz and type: the three words before a note's name. */
const NOTE_HEADER = 12;

export interface ElfNote {
  /** The owner's name without its NUL, as a byte string: 'GNU', 'FDO'… */
  readonly owner: ByteString;
  readonly type: number;
  /** The descriptor's bytes, a view of the read: copy before changing them. */
  readonly descriptor: Uint8Array;
}

/**
 * The notes held in `bytes` (one note segment or section), in order. Names and descriptors are padded
 * to the alignment (8 where the segment or section says so, else 4). A note that runs past the end
 * ends the list; with `cutDescriptor: 'kept'`, a descriptor that does is kept up to the end, and ends
 * the list after it.
 */
function* notesIn(
  bytes: Uint8Array,
  littleEndian: boolean,
  alignment: number,
  cutDescriptor: 'dropped' | 'kept' = 'dropped',
): Generator<ElfNote> {
  const view = dataViewOf(bytes);
  const align = alignment === 8 ? 8 : 4;
  const up = (n: number): number => Math.ceil(n / align) * align;
  for (let at = 0; at + NOTE_HEADER <= bytes.length; ) {
    const nameSize = view.getUint32(at, littleEndian);
    const descriptorSize = view.getUint32(at + 4, littleEndian);
    const type = view.getUint32(at + 8, littleEndian);
    const nameAt = at + NOTE_HEADER;
    const descriptorAt = nameAt + up(nameSize);
    const cut = descriptorAt + descriptorSize > bytes.length;
    if ((cut && cutDescriptor === 'dropped') || descriptorAt > bytes.length) return;
    const owner = bytesToByteString(bytes.subarray(nameAt, nameAt + Math.max(0, nameSize - 1)));
    yield { owner, type, descriptor: bytes.subarray(descriptorAt, Math.min(bytes.length, descriptorAt + descriptorSize)) };
    if (cut) return;
    at = descriptorAt + up(descriptorSize);
  }
}

/** Where notes lie: a segment's or a section's offset, size and alignment. */
interface NoteRange {
  readonly what: string;
  readonly offset: number;
  readonly size: number;
  readonly alignment: number;
}

/**
 * The notes of a file: those of its PT_NOTE segments, what the loader maps and where a linked
 * program's or library's notes are; a file without program headers (an object file) has them only
 * in its SHT_NOTE sections, which are read instead. An empty range, one past the end of the file, or
 * one larger than LARGEST_NOTES is not read.
 */
export async function readNotes(image: ElfImage): Promise<ElfNote[]> {
  const { source, codec } = image;
  const ranges: NoteRange[] =
    image.programHeaders.length > 0
      ? image.programHeaders
          .filter((ph) => ph.p_type === PT.PT_NOTE)
          .map((ph) => ({ what: 'note segment', offset: ph.p_offset, size: ph.p_filesz, alignment: ph.p_align }))
      : (await readSectionHeaders(image))
          .filter((section) => section.sh_type === SHT.SHT_NOTE)
          .map((section) => ({ what: 'note section', offset: section.sh_offset, size: section.sh_size, alignment: section.sh_addralign }));
  const notes: ElfNote[] = [];
  for (const range of ranges) {
    if (range.size === 0 || range.size > LARGEST_NOTES || range.offset + range.size > source.size) continue;
    const bytes = await source.read(range.offset, range.size, range.what);
    notes.push(...notesIn(bytes, codec.littleEndian, range.alignment));
  }
  return notes;
}

/**
 * The notes of one SHT_NOTE section, read by name rather than through the note segments: notes that a
 * vendor's tools find by section name (NVIDIA's `.note.cuda.fwd_compatibility`) need not lie in a
 * PT_NOTE segment. As those tools read them, a descriptor that runs past the section's end is kept up
 * to it. A section past the end of the file, or larger than LARGEST_NOTES, is malformed.
 */
export async function readNoteSection(image: ElfImage, section: Section): Promise<ElfNote[]> {
  const { source, codec } = image;
  const name = byteStringToText(section.name);
  if (section.sh_size > LARGEST_NOTES) throw malformedInput(`${name} is ${section.sh_size} bytes, more than a note section holds`);
  if (section.sh_offset + section.sh_size > source.size) throw malformedInput(`${name} runs past the end of the file`, section.sh_offset);
  const bytes = await source.read(section.sh_offset, section.sh_size, name);
  return [...notesIn(bytes, codec.littleEndian, section.sh_addralign, 'kept')];
}
