// Strings a library carries that say what it will dlopen or which driver it is: names in .dynstr,
// the `.note.dlopen` notes of the FDO package metadata spec, and strings in .rodata (the CUDA runtime
// linked statically, a libcuda's own version), and the note a compat libcuda carries. Each region is
// read in bounded chunks, positionally, once per file, however many programs load the file.

import {
  type ByteString,
  bytesToByteString,
  type CudaCompatNoteReading,
  type DlopenEntry,
  dlopenNotes,
  type ElfFile,
  SHT,
  withElfFile,
} from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { ObjectFacts } from '../loader/object-facts.js';

const CHUNK = 1024 * 1024;
/** No bytes carried over: one shared empty array, not one per NUL (there are millions). */
const NOTHING = new Uint8Array(0);

/**
 * Which strings a scan wants to see: binary sections hold millions of NUL-separated pieces, and only a
 * few of the right length and first byte are worth turning into strings.
 */
export interface StringShape {
  readonly maxLength: number;
  readonly firstByte: (byte: number) => boolean;
}

/** Where a scan reads: a section or table's file offset and size. */
interface Region {
  readonly offset: number;
  readonly size: number;
}

/** The region's bytes, a chunk at a time: a driver's .rodata is tens of MiB. */
async function* chunksOf(file: ElfFile, region: Region, what: string): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < region.size; at += CHUNK) yield await file.bytes(region.offset + at, Math.min(CHUNK, region.size - at), what);
}

/**
 * The NUL-terminated strings of one shape in a region read chunk by chunk, in order: a string that a
 * chunk's end cuts is carried into the next while it may still be wanted. One pass over the bytes: a
 * call per NUL would cost seconds on a driver's 20 MiB .rodata.
 */
class ShapedStrings {
  private readonly shape: StringShape;
  /** The part of the current string read with earlier chunks, kept while it may still be wanted. */
  private carry: Uint8Array = NOTHING;
  private length = 0;
  private wanted = false;

  constructor(shape: StringShape) {
    this.shape = shape;
  }

  /** The strings of the shape that end in `chunk`, the next chunk of the region. */
  *endingIn(chunk: Uint8Array): Generator<ByteString> {
    const { shape } = this;
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      if (chunk[i] !== 0) {
        if (this.length === 0) this.wanted = shape.firstByte(chunk[i] as number);
        this.length++;
        continue;
      }
      if (this.wanted && this.length > 0 && this.length <= shape.maxLength) {
        const bytes = this.carry.length === 0 ? chunk.subarray(start, i) : Buffer.concat([this.carry, chunk.subarray(start, i)]);
        yield bytesToByteString(bytes);
      }
      this.carry = NOTHING;
      this.length = 0;
      start = i + 1;
    }
    this.carry =
      this.wanted && this.length > 0 && this.length <= shape.maxLength ? Buffer.concat([this.carry, chunk.subarray(start)]) : NOTHING;
  }
}

/** Which of `names` the region holds as whole strings. */
async function namesIn(
  file: ElfFile,
  region: Region,
  what: string,
  shape: StringShape,
  names: ReadonlySet<ByteString>,
): Promise<Set<ByteString>> {
  const found = new Set<ByteString>();
  const strings = new ShapedStrings(shape);
  for await (const chunk of chunksOf(file, region, what)) {
    for (const text of strings.endingIn(chunk)) if (names.has(text)) found.add(text);
  }
  return found;
}

/** The first string of the region of that shape that `match` accepts, or null; nothing after it is read. */
async function firstIn(
  file: ElfFile,
  region: Region,
  what: string,
  shape: StringShape,
  match: (text: ByteString) => boolean,
): Promise<ByteString | null> {
  const strings = new ShapedStrings(shape);
  for await (const chunk of chunksOf(file, region, what)) {
    for (const text of strings.endingIn(chunk)) if (match(text)) return text;
  }
  return null;
}

interface FileStrings {
  readonly dynstrNames: Set<ByteString>;
  /** The `.note.dlopen` entries (a malformed note left out, as the resolver leaves it). */
  readonly notes: readonly DlopenEntry[];
}

async function sectionNamed(file: ElfFile, name: string): Promise<Region | null> {
  try {
    const section = (await file.sections()).find((s) => s.name === name && s.sh_type === SHT.SHT_PROGBITS);
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
  private readonly dynstrNames: ReadonlySet<ByteString>;
  private readonly files = new Map<string, Promise<FileStrings>>();
  private readonly rodata = new Map<string, Promise<ByteString | null>>();
  private readonly held = new Map<string, Promise<ReadonlySet<ByteString>>>();
  private readonly compatNotes = new Map<string, Promise<CudaCompatNoteReading>>();

  private readonly namesShape: StringShape;

  constructor(dynstrNames: Iterable<ByteString>) {
    this.dynstrNames = new Set(dynstrNames);
    const firstBytes = new Set([...this.dynstrNames].map((name) => name.charCodeAt(0)));
    this.namesShape = {
      maxLength: Math.max(0, ...[...this.dynstrNames].map((name) => name.length)),
      firstByte: (byte) => firstBytes.has(byte),
    };
  }

  private strings(facts: ObjectFacts): Promise<FileStrings> {
    let found = this.files.get(facts.fileId);
    if (found === undefined) {
      found = withElfFile(facts.hostPath, async (file) => {
        const table = file.image.dynamicStrings;
        const names =
          table === null ? new Set<ByteString>() : await namesIn(file, table, 'dynamic string table', this.namesShape, this.dynstrNames);
        return { dynstrNames: names, notes: dlopenNotes(await file.notes()).entries };
      });
      this.files.set(facts.fileId, found);
    }
    return found;
  }

  /** Which of the run's names the file's .dynstr holds as whole strings. */
  async dynstrHas(facts: ObjectFacts, name: ByteString): Promise<boolean> {
    return (await this.strings(facts)).dynstrNames.has(name);
  }

  async dlopenEntries(facts: ObjectFacts): Promise<readonly DlopenEntry[]> {
    return (await this.strings(facts)).notes;
  }

  /**
   * Which of `names` the file's .dynstr or .rodata holds as whole strings (a library names what it
   * dlopens there), read once per file and set of names.
   */
  namesHeld(facts: ObjectFacts, names: ReadonlySet<ByteString>): Promise<ReadonlySet<ByteString>> {
    const key = `${facts.fileId}\0${[...names].sort().join('\0')}`;
    let found = this.held.get(key);
    if (found === undefined) {
      const firstBytes = new Set([...names].map((name) => name.charCodeAt(0)));
      const shape: StringShape = {
        maxLength: Math.max(0, ...[...names].map((name) => name.length)),
        firstByte: (byte) => firstBytes.has(byte),
      };
      found = withElfFile(facts.hostPath, async (file) => {
        const regions = [
          ...(file.image.dynamicStrings === null ? [] : [{ region: file.image.dynamicStrings, what: 'dynamic string table' }]),
          ...[await sectionNamed(file, '.rodata')].flatMap((region) => (region === null ? [] : [{ region, what: '.rodata' }])),
        ];
        const held = new Set<ByteString>();
        for (const { region, what } of regions) for (const name of await namesIn(file, region, what, shape, names)) held.add(name);
        return held;
      });
      this.held.set(key, found);
    }
    return found;
  }

  /** What the file's `.note.cuda.fwd_compatibility` says (a compat libcuda's; absent elsewhere), read once per file. */
  compatNote(facts: ObjectFacts): Promise<CudaCompatNoteReading> {
    let found = this.compatNotes.get(facts.fileId);
    if (found === undefined) {
      found = withElfFile(facts.hostPath, (file) => file.cudaCompatNote());
      this.compatNotes.set(facts.fileId, found);
    }
    return found;
  }

  /** The first string of .rodata of that shape that `match` accepts (keyed by `question`), or null. */
  firstInRodata(
    facts: ObjectFacts,
    question: string,
    shape: StringShape,
    match: (text: ByteString) => boolean,
  ): Promise<ByteString | null> {
    const key = `${facts.fileId}\0${question}`;
    let found = this.rodata.get(key);
    if (found === undefined) {
      found = withElfFile(facts.hostPath, async (file) => {
        const rodata = await sectionNamed(file, '.rodata');
        return rodata === null ? null : await firstIn(file, rodata, '.rodata', shape, match);
      });
      this.rodata.set(key, found);
    }
    return found;
  }
}
