// Strings a library carries that say what it will dlopen or which driver it is: names in .dynstr,
// the `.note.dlopen` notes of the FDO package metadata spec, and strings in .rodata (the CUDA runtime
// linked statically, a libcuda's own version). Each region is read in bounded chunks, positionally,
// once per file, however many programs load the file.

import { dataViewOf, FileByteSource, type ByteSource } from '../elf/byte-source.js';
import { bytesToByteString } from '../elf/byte-string.js';
import { PT, SHT } from '../elf/constants.js';
import { readElfImage, type ElfImage } from '../elf/elf-image.js';
import { readSectionHeaders } from '../elf/section-headers.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { ObjectFacts } from './object-facts.js';

const CHUNK = 1024 * 1024;
/** No bytes carried over: one shared empty array, not one per NUL (there are millions). */
const NOTHING = new Uint8Array(0);
/** A note segment larger than this is not read (real ones are a few hundred bytes). */
const LARGEST_NOTES = 1024 * 1024;
/** The `.note.dlopen` owner and type (https://systemd.io/ELF_DLOPEN_METADATA/). */
const FDO_OWNER = 'FDO';
const NT_FDO_DLOPEN_METADATA = 0x407c0c0a;

/**
 * Which strings a scan wants to see: binary sections hold millions of NUL-separated pieces, and only a
 * few of the right length and first byte are worth turning into strings.
 */
export interface StringShape {
  readonly maxLength: number;
  readonly firstByte: (byte: number) => boolean;
}

/**
 * Calls `visit` with each NUL-terminated string of [offset, offset+size) of that shape, in order, until it
 * returns true. One pass over the bytes: a call per NUL would cost seconds on a driver's 20 MiB .rodata.
 */
async function scanStrings(
  source: ByteSource,
  offset: number,
  size: number,
  what: string,
  shape: StringShape,
  visit: (text: string) => boolean,
): Promise<void> {
  // The part of the current string read with earlier chunks, kept while it may still be wanted.
  let carry: Uint8Array = NOTHING;
  let length = 0;
  let wanted = false;
  for (let at = 0; at < size; at += CHUNK) {
    const chunk = await source.read(offset + at, Math.min(CHUNK, size - at), what);
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      if (chunk[i] !== 0) {
        if (length === 0) wanted = shape.firstByte(chunk[i] as number);
        length++;
        continue;
      }
      if (wanted && length > 0 && length <= shape.maxLength) {
        const bytes = carry.length === 0 ? chunk.subarray(start, i) : Buffer.concat([carry, chunk.subarray(start, i)]);
        if (visit(bytesToByteString(bytes))) return;
      }
      carry = NOTHING;
      length = 0;
      start = i + 1;
    }
    carry = wanted && length > 0 && length <= shape.maxLength ? Buffer.concat([carry, chunk.subarray(start)]) : NOTHING;
  }
}

export interface DlopenNote {
  /** Sonames in the order the note lists them. */
  readonly sonames: readonly string[];
  /** required, recommended or suggested (the spec's default: recommended). */
  readonly priority: string;
  readonly feature: string | null;
}

/** The `.note.dlopen` entries of the PT_NOTE segments; a payload that is not the spec's JSON is left out. */
async function readDlopenNotes(image: ElfImage): Promise<DlopenNote[]> {
  const notes: DlopenNote[] = [];
  const { codec, source } = image;
  for (const ph of image.programHeaders) {
    if (ph.p_type !== PT.PT_NOTE || ph.p_filesz === 0 || ph.p_filesz > LARGEST_NOTES || ph.p_offset + ph.p_filesz > source.size) continue;
    const bytes = await source.read(ph.p_offset, ph.p_filesz, 'note segment');
    const view = dataViewOf(bytes);
    const align = ph.p_align === 8 ? 8 : 4;
    const up = (n: number): number => Math.ceil(n / align) * align;
    for (let at = 0; at + 12 <= bytes.length; ) {
      const nameSize = view.getUint32(at, codec.littleEndian);
      const descSize = view.getUint32(at + 4, codec.littleEndian);
      const type = view.getUint32(at + 8, codec.littleEndian);
      const nameAt = at + 12;
      const descAt = nameAt + up(nameSize);
      if (descAt + descSize > bytes.length) break;
      const owner = bytesToByteString(bytes.subarray(nameAt, nameAt + Math.max(0, nameSize - 1)));
      if (owner === FDO_OWNER && type === NT_FDO_DLOPEN_METADATA)
        notes.push(...parseDlopenPayload(bytes.subarray(descAt, descAt + descSize)));
      at = descAt + up(descSize);
    }
  }
  return notes;
}

function parseDlopenPayload(bytes: Uint8Array): DlopenNote[] {
  const end = bytes.indexOf(0);
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(bytes.subarray(0, end < 0 ? bytes.length : end)).toString('utf8'));
  } catch {
    return [];
  }
  if (!Array.isArray(parsed)) return [];
  return parsed.flatMap((entry): DlopenNote[] => {
    if (typeof entry !== 'object' || entry === null) return [];
    const { soname, priority, feature } = entry as { soname?: unknown; priority?: unknown; feature?: unknown };
    if (!Array.isArray(soname) || !soname.every((s): s is string => typeof s === 'string')) return [];
    return [
      {
        sonames: soname,
        priority: typeof priority === 'string' ? priority : 'recommended',
        feature: typeof feature === 'string' ? feature : null,
      },
    ];
  });
}

interface FileStrings {
  readonly dynstrNames: Set<string>;
  readonly notes: readonly DlopenNote[];
}

async function sectionNamed(image: ElfImage, name: string): Promise<{ offset: number; size: number } | null> {
  try {
    const section = (await readSectionHeaders(image)).find((s) => s.name === name && s.sh_type === SHT.SHT_PROGBITS);
    return section === undefined ? null : { offset: section.sh_offset, size: section.sh_size };
  } catch (error) {
    // Section headers are optional: a stripped file has no .rodata to look in.
    if (error instanceof CudaPatchelfError) return null;
    throw error;
  }
}

/** The strings doctor asks of files, read once per file and per question. */
export class ObjectStrings {
  /** The names looked for in .dynstr (the same for every file of a run). */
  private readonly dynstrNames: ReadonlySet<string>;
  private readonly files = new Map<string, Promise<FileStrings>>();
  private readonly rodata = new Map<string, Promise<string | null>>();

  private readonly namesShape: StringShape;

  constructor(dynstrNames: Iterable<string>) {
    this.dynstrNames = new Set(dynstrNames);
    const firstBytes = new Set([...this.dynstrNames].map((name) => name.charCodeAt(0)));
    this.namesShape = {
      maxLength: Math.max(0, ...[...this.dynstrNames].map((name) => name.length)),
      firstByte: (byte) => firstBytes.has(byte),
    };
  }

  private async withImage<T>(facts: ObjectFacts, work: (image: ElfImage) => Promise<T>): Promise<T> {
    const source = FileByteSource.open(facts.hostPath);
    try {
      return await work(await readElfImage(source));
    } catch (error) {
      throw error instanceof CudaPatchelfError ? error.withFile(facts.hostPath) : error;
    } finally {
      source.close();
    }
  }

  private strings(facts: ObjectFacts): Promise<FileStrings> {
    let found = this.files.get(facts.fileId);
    if (found === undefined) {
      found = this.withImage(facts, async (image) => {
        const names = new Set<string>();
        const table = image.dynamicStrings;
        if (table !== null) {
          await scanStrings(image.source, table.offset, table.size, 'dynamic string table', this.namesShape, (text) => {
            if (this.dynstrNames.has(text)) names.add(text);
            return false;
          });
        }
        return { dynstrNames: names, notes: await readDlopenNotes(image) };
      });
      this.files.set(facts.fileId, found);
    }
    return found;
  }

  /** Which of the run's names the file's .dynstr holds as whole strings. */
  async dynstrHas(facts: ObjectFacts, name: string): Promise<boolean> {
    return (await this.strings(facts)).dynstrNames.has(name);
  }

  async dlopenNotes(facts: ObjectFacts): Promise<readonly DlopenNote[]> {
    return (await this.strings(facts)).notes;
  }

  /** The first string of .rodata of that shape that `match` accepts (keyed by `question`), or null. */
  firstInRodata(facts: ObjectFacts, question: string, shape: StringShape, match: (text: string) => boolean): Promise<string | null> {
    const key = `${facts.fileId}\0${question}`;
    let found = this.rodata.get(key);
    if (found === undefined) {
      found = this.withImage(facts, async (image) => {
        const rodata = await sectionNamed(image, '.rodata');
        if (rodata === null) return null;
        let hit: string | null = null;
        await scanStrings(image.source, rodata.offset, rodata.size, '.rodata', shape, (text) => {
          if (!match(text)) return false;
          hit = text;
          return true;
        });
        return hit;
      });
      this.rodata.set(key, found);
    }
    return found;
  }
}
