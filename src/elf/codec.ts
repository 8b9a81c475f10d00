// One codec for every ELF flavour: records are described once as field lists per class, and every
// read and write goes through the codec, which knows the class (32/64) and the byte order.

import { malformedInput } from '../errors/cuda-patchelf-error.js';

export type ElfClass = 32 | 64;

/**
 * Field widths. `word` is 4 bytes in both classes; `addr`, `off` and `xword` are 4 or 8 (the natural
 * word of the class); `sxword` is the signed variant (d_tag).
 */
type FieldType = 'u8' | 'half' | 'word' | 'addr' | 'off' | 'xword' | 'sxword';

type FieldList<N extends string> = readonly (readonly [N, FieldType])[];

/** A record whose field order may differ between the classes (Elf32_Phdr vs Elf64_Phdr). */
export interface RecordLayout<N extends string> {
  readonly name: string;
  readonly fields32: FieldList<N>;
  readonly fields64: FieldList<N>;
}

/** A record laid out alike in ELF32 and ELF64 (its fields' widths still follow the class). */
function sameInBothClasses<N extends string>(name: string, fields: FieldList<N>): RecordLayout<N> {
  return { name, fields32: fields, fields64: fields };
}

export type RecordOf<L> = L extends RecordLayout<infer N> ? Record<N, number> : never;

function width(type: FieldType, elfClass: ElfClass): number {
  switch (type) {
    case 'u8':
      return 1;
    case 'half':
      return 2;
    case 'word':
      return 4;
    default:
      return elfClass === 64 ? 8 : 4;
  }
}

interface PlacedField<N extends string> {
  readonly name: N;
  readonly type: FieldType;
  readonly at: number;
  readonly width: number;
}

interface PlacedLayout<N extends string> {
  readonly size: number;
  readonly fields: readonly PlacedField<N>[];
  readonly byName: ReadonlyMap<N, PlacedField<N>>;
  /** Reads one record into a new object (bounds already checked). */
  readonly read: (view: DataView, at: number, littleEndian: boolean) => Record<N, number>;
  /** Writes the fields `record` has (bounds already checked); a value that is not an integer throws. */
  readonly write: (view: DataView, at: number, littleEndian: boolean, record: Partial<Record<N, number>>) => void;
}

const TWO_32 = 2 ** 32;

function place<N extends string>(fields: FieldList<N>, elfClass: ElfClass): PlacedLayout<N> {
  let at = 0;
  const placed: PlacedField<N>[] = [];
  for (const [name, type] of fields) {
    const w = width(type, elfClass);
    placed.push({ name, type, at, width: w });
    at += w;
  }
  return {
    size: at,
    fields: placed,
    byName: new Map(placed.map((f) => [f.name, f])),
    read: compileReader(placed),
    write: compileWriter(placed),
  };
}

/** The expression that reads one field at `at + field.at` of `view`, in byte order `le`. */
function fieldExpression(field: PlacedField<string>): string {
  const at = `at + ${field.at}`;
  switch (field.width) {
    case 1:
      return `view.getUint8(${at})`;
    case 2:
      return `view.getUint16(${at}, le)`;
    case 4:
      return field.type === 'sxword' ? `view.getInt32(${at}, le)` : `view.getUint32(${at}, le)`;
    default: {
      // The high word carries the sign of an sxword; the low word is always unsigned.
      const high = (word: string): string => (field.type === 'sxword' ? `view.getInt32(${word}, le)` : `view.getUint32(${word}, le)`);
      const low = (word: string): string => `view.getUint32(${word}, le)`;
      return `(le ? ${high(`${at} + 4`)} * ${TWO_32} + ${low(at)} : ${high(at)} * ${TWO_32} + ${low(`${at} + 4`)})`;
    }
  }
}

/**
 * A record reader compiled from the field list: one object literal, so every record of a layout has
 * the same shape from the start. Filling an object field by field under computed names costs three to
 * four times as much (docs/benchmarks.md), and tables of thousands of records are decoded per file.
 */
function compileReader<N extends string>(fields: readonly PlacedField<N>[]): PlacedLayout<N>['read'] {
  for (const field of fields) if (!/^[a-z_]+$/.test(field.name)) throw new Error(`field name ${field.name} is not an identifier`);
  const body = `return { ${fields.map((field) => `${field.name}: ${fieldExpression(field)}`).join(', ')} };`;
  return new Function('view', 'at', 'le', body) as PlacedLayout<N>['read'];
}

/** The statement that writes `v` to one field at `at + field.at` of `view`, in byte order `le`. */
function fieldStatement(field: PlacedField<string>): string {
  const at = `at + ${field.at}`;
  switch (field.width) {
    case 1:
      return `view.setUint8(${at}, v);`;
    case 2:
      return `view.setUint16(${at}, v, le);`;
    case 4:
      return field.type === 'sxword' ? `view.setInt32(${at}, v, le);` : `view.setUint32(${at}, v, le);`;
    default:
      // Two words; a negative sxword's high word is written as its two's complement.
      return (
        `{ const high = Math.floor(v / ${TWO_32}); view.setUint32(le ? ${at} : ${at} + 4, v - high * ` +
        `${TWO_32}, le); view.setUint32(le ? ${at} + 4 : ${at}, high >>> 0, le); }`
      );
  }
}

/** A record writer compiled from the field list, for the reason the reader is: no field looked up by name. */
function compileWriter<N extends string>(fields: readonly PlacedField<N>[]): PlacedLayout<N>['write'] {
  const statements = fields.map(
    (field) =>
      `v = record.${field.name}; if (v !== undefined) { if (!Number.isInteger(v)) throw new ` +
      `RangeError('${field.name} = ' + v + ' is not an integer'); ${fieldStatement(field)} }`,
  );
  return new Function('view', 'at', 'le', 'record', `let v;\n${statements.join('\n')}`) as PlacedLayout<N>['write'];
}

/** Placed layouts per class, shared by every codec: a tree of files would otherwise place them per file. */
const PLACED: Record<ElfClass, Map<RecordLayout<string>, PlacedLayout<string>>> = { 32: new Map(), 64: new Map() };

export class ElfCodec {
  readonly elfClass: ElfClass;
  readonly littleEndian: boolean;
  /** Bytes in an address, offset or xword: 4 or 8. */
  readonly wordSize: 4 | 8;
  private lastBytes: Uint8Array | null = null;
  private lastView: DataView | null = null;
  private lastLayout: RecordLayout<string> | null = null;
  private lastPlaced: PlacedLayout<string> | null = null;

  constructor(elfClass: ElfClass, littleEndian: boolean) {
    this.elfClass = elfClass;
    this.littleEndian = littleEndian;
    this.wordSize = elfClass === 64 ? 8 : 4;
  }

  private layoutOf<N extends string>(layout: RecordLayout<N>): PlacedLayout<N> {
    // Tables are decoded and encoded record after record: the last layout asked for is asked again.
    if (layout === this.lastLayout && this.lastPlaced !== null) return this.lastPlaced as unknown as PlacedLayout<N>;
    const placedForClass = PLACED[this.elfClass];
    let placed = placedForClass.get(layout);
    if (placed === undefined) {
      placed = place(this.elfClass === 64 ? layout.fields64 : layout.fields32, this.elfClass);
      placedForClass.set(layout, placed);
    }
    this.lastLayout = layout;
    this.lastPlaced = placed;
    return placed as unknown as PlacedLayout<N>;
  }

  /** Size in bytes of one record of this layout in this class. */
  sizeOf<N extends string>(layout: RecordLayout<N>): number {
    return this.layoutOf(layout).size;
  }

  /** Byte offset of a field inside its record. */
  fieldOffset<N extends string>(layout: RecordLayout<N>, field: N): number {
    const placed = this.layoutOf(layout).byName.get(field);
    if (placed === undefined) throw new Error(`${layout.name} has no field ${field}`);
    return placed.at;
  }

  /**
   * Decodes the record at `at` of `bytes`. 64-bit values above 2^53 come back rounded; every offset
   * and size is bounds-checked against the file size by its user, which rejects such values anyway.
   */
  decode<N extends string>(layout: RecordLayout<N>, bytes: Uint8Array, at: number): Record<N, number> {
    const placed = this.layoutOf(layout);
    if (at < 0 || at + placed.size > bytes.length) {
      throw malformedInput(`${layout.name} record runs past the end of the data read`, at);
    }
    return placed.read(this.viewOf(bytes), at, this.littleEndian);
  }

  /** Encodes `record` into `bytes` at `at`. Fields missing from `record` are left untouched. */
  encode<N extends string>(layout: RecordLayout<N>, record: Partial<Record<N, number>>, bytes: Uint8Array, at: number): void {
    const placed = this.layoutOf(layout);
    if (at < 0 || at + placed.size > bytes.length) throw new RangeError(`${layout.name} does not fit at ${at}`);
    placed.write(this.viewOf(bytes), at, this.littleEndian, record);
  }

  /** A new zeroed buffer holding one encoded record. */
  encodeRecord<N extends string>(layout: RecordLayout<N>, record: Record<N, number>): Uint8Array {
    const bytes = new Uint8Array(this.sizeOf(layout));
    this.encode(layout, record, bytes, 0);
    return bytes;
  }

  /** Records back to back in `count` slots (slots past the records stay zero): a table as the file holds it. */
  encodeRecords<N extends string>(layout: RecordLayout<N>, records: readonly Record<N, number>[], count = records.length): Uint8Array {
    const size = this.sizeOf(layout);
    const bytes = new Uint8Array(count * size);
    for (const [i, record] of records.entries()) this.encode(layout, record, bytes, i * size);
    return bytes;
  }

  /** Tables are decoded and encoded record after record in one buffer: one view serves them all. */
  private viewOf(bytes: Uint8Array): DataView {
    if (this.lastBytes !== bytes || this.lastView === null) {
      this.lastView = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      this.lastBytes = bytes;
    }
    return this.lastView;
  }
}

/** Elf32_Ehdr / Elf64_Ehdr, after the 16 bytes of e_ident. */
export const EHDR = sameInBothClasses('ELF header', [
  ['e_type', 'half'],
  ['e_machine', 'half'],
  ['e_version', 'word'],
  ['e_entry', 'addr'],
  ['e_phoff', 'off'],
  ['e_shoff', 'off'],
  ['e_flags', 'word'],
  ['e_ehsize', 'half'],
  ['e_phentsize', 'half'],
  ['e_phnum', 'half'],
  ['e_shentsize', 'half'],
  ['e_shnum', 'half'],
  ['e_shstrndx', 'half'],
]);

/** Elf32_Phdr / Elf64_Phdr: p_flags moves to second place in ELF64. */
export const PHDR: RecordLayout<'p_type' | 'p_flags' | 'p_offset' | 'p_vaddr' | 'p_paddr' | 'p_filesz' | 'p_memsz' | 'p_align'> = {
  name: 'program header',
  fields32: [
    ['p_type', 'word'],
    ['p_offset', 'off'],
    ['p_vaddr', 'addr'],
    ['p_paddr', 'addr'],
    ['p_filesz', 'word'],
    ['p_memsz', 'word'],
    ['p_flags', 'word'],
    ['p_align', 'word'],
  ],
  fields64: [
    ['p_type', 'word'],
    ['p_flags', 'word'],
    ['p_offset', 'off'],
    ['p_vaddr', 'addr'],
    ['p_paddr', 'addr'],
    ['p_filesz', 'xword'],
    ['p_memsz', 'xword'],
    ['p_align', 'xword'],
  ],
};

/** Elf32_Shdr / Elf64_Shdr. */
export const SHDR = sameInBothClasses('section header', [
  ['sh_name', 'word'],
  ['sh_type', 'word'],
  ['sh_flags', 'xword'],
  ['sh_addr', 'addr'],
  ['sh_offset', 'off'],
  ['sh_size', 'xword'],
  ['sh_link', 'word'],
  ['sh_info', 'word'],
  ['sh_addralign', 'xword'],
  ['sh_entsize', 'xword'],
]);

/** Elf32_Dyn / Elf64_Dyn. */
export const DYN = sameInBothClasses('dynamic entry', [
  ['d_tag', 'sxword'],
  ['d_val', 'xword'],
]);

export type ElfHeaderFields = RecordOf<typeof EHDR>;
export type ProgramHeader = RecordOf<typeof PHDR>;
export type SectionHeader = RecordOf<typeof SHDR>;
export type DynamicEntry = RecordOf<typeof DYN>;

/** Elf_Verneed / Elf_Vernaux / Elf_Verdef / Elf_Verdaux: the same in both classes. */
export const VERNEED = sameInBothClasses('version need entry', [
  ['vn_version', 'half'],
  ['vn_cnt', 'half'],
  ['vn_file', 'word'],
  ['vn_aux', 'word'],
  ['vn_next', 'word'],
]);

export const VERNAUX = sameInBothClasses('version need aux entry', [
  ['vna_hash', 'word'],
  ['vna_flags', 'half'],
  ['vna_other', 'half'],
  ['vna_name', 'word'],
  ['vna_next', 'word'],
]);

export const VERDEF = sameInBothClasses('version definition entry', [
  ['vd_version', 'half'],
  ['vd_flags', 'half'],
  ['vd_ndx', 'half'],
  ['vd_cnt', 'half'],
  ['vd_hash', 'word'],
  ['vd_aux', 'word'],
  ['vd_next', 'word'],
]);

export const VERDAUX = sameInBothClasses('version definition aux entry', [
  ['vda_name', 'word'],
  ['vda_next', 'word'],
]);

/** Elf32_Sym / Elf64_Sym: the value moves ahead of st_info in ELF64. */
export const SYM: RecordLayout<'st_name' | 'st_value' | 'st_size' | 'st_info' | 'st_other' | 'st_shndx'> = {
  name: 'symbol',
  fields32: [
    ['st_name', 'word'],
    ['st_value', 'addr'],
    ['st_size', 'word'],
    ['st_info', 'u8'],
    ['st_other', 'u8'],
    ['st_shndx', 'half'],
  ],
  fields64: [
    ['st_name', 'word'],
    ['st_info', 'u8'],
    ['st_other', 'u8'],
    ['st_shndx', 'half'],
    ['st_value', 'addr'],
    ['st_size', 'xword'],
  ],
};
