// The version records (.gnu.version_r through DT_VERNEED, .gnu.version_d through DT_VERDEF) as
// references into the dynamic string table: the file and version names a library needs, the
// versions it defines. Both tables are lists of entries, each with a list of aux entries, walked the
// same way: one walker, given each table's layouts and field names.

import type { ByteSource } from './byte-source.js';
import { VERDAUX, VERDEF, VERNAUX, VERNEED, type ElfCodec, type RecordLayout } from './codec.js';
import { DT } from './constants.js';
import { dynamicValue, fileOffsetOf, type ElfImage } from './elf-image.js';
import type { StringReference } from './string-references.js';

/**
 * Version records are small and close together: they are read through a window instead of one by
 * one. Real version sections are a few hundred bytes to a few KiB, so the window starts small and
 * doubles with each refill: a big first window cost more to fill and collect than the records it held.
 */
const FIRST_RECORD_WINDOW = 512;
const LARGEST_RECORD_WINDOW = 16 * 1024;

class RecordReader {
  private window: Uint8Array = new Uint8Array(0);
  private windowAt = 0;
  private nextWindow = FIRST_RECORD_WINDOW;
  private readonly source: ByteSource;
  private readonly codec: ElfCodec;

  constructor(source: ByteSource, codec: ElfCodec) {
    this.source = source;
    this.codec = codec;
  }

  async read<N extends string>(layout: RecordLayout<N>, offset: number): Promise<Record<N, number>> {
    const size = this.codec.sizeOf(layout);
    if (offset < this.windowAt || offset + size > this.windowAt + this.window.length) {
      const length = Math.max(size, Math.min(this.nextWindow, this.source.size - offset));
      this.window = await this.source.read(offset, length, layout.name);
      this.windowAt = offset;
      this.nextWindow = Math.min(2 * this.nextWindow, LARGEST_RECORD_WINDOW);
    }
    return this.codec.decode(layout, this.window, offset - this.windowAt);
  }
}

/** The field names of a record layout. */
type FieldsOf<L> = L extends RecordLayout<infer N> ? N : never;

/** One version table: where the dynamic array says it is, and the fields that chain its entries. */
interface VersionTable<E extends string, A extends string> {
  readonly tag: number;
  readonly countTag: number;
  readonly what: string;
  readonly entry: RecordLayout<E>;
  /** The entry's aux count, offset of its first aux entry, and offset of the next entry (0: the last). */
  readonly entryFields: { readonly count: E; readonly aux: E; readonly next: E };
  /** The entry's own reference into the string table (the needed file's name), when it has one. */
  readonly entryName: { readonly field: E; readonly source: StringReference['source'] } | null;
  readonly aux: RecordLayout<A>;
  readonly auxFields: { readonly name: A; readonly next: A };
  readonly auxSource: StringReference['source'];
}

const VERSION_NEEDS: VersionTable<FieldsOf<typeof VERNEED>, FieldsOf<typeof VERNAUX>> = {
  tag: DT.DT_VERNEED,
  countTag: DT.DT_VERNEEDNUM,
  what: 'version needs (DT_VERNEED)',
  entry: VERNEED,
  entryFields: { count: 'vn_cnt', aux: 'vn_aux', next: 'vn_next' },
  entryName: { field: 'vn_file', source: 'version-need-file' },
  aux: VERNAUX,
  auxFields: { name: 'vna_name', next: 'vna_next' },
  auxSource: 'version-need-name',
};

const VERSION_DEFINITIONS: VersionTable<FieldsOf<typeof VERDEF>, FieldsOf<typeof VERDAUX>> = {
  tag: DT.DT_VERDEF,
  countTag: DT.DT_VERDEFNUM,
  what: 'version definitions (DT_VERDEF)',
  entry: VERDEF,
  entryFields: { count: 'vd_cnt', aux: 'vd_aux', next: 'vd_next' },
  entryName: null,
  aux: VERDAUX,
  auxFields: { name: 'vda_name', next: 'vda_next' },
  auxSource: 'version-definition',
};

/** Every reference of the version needs, then of the version definitions, in file order within each. */
export async function readVersionRecords(image: ElfImage): Promise<StringReference[]> {
  return [...(await versionTableReferences(image, VERSION_NEEDS)), ...(await versionTableReferences(image, VERSION_DEFINITIONS))];
}

async function versionTableReferences<E extends string, A extends string>(
  image: ElfImage,
  table: VersionTable<E, A>,
): Promise<StringReference[]> {
  const references: StringReference[] = [];
  const dynamic = image.dynamic;
  if (dynamic === null) return references;
  const address = dynamicValue(dynamic, table.tag);
  if (address === undefined) return references;
  const { source, codec, programHeaders } = image;
  const count = Math.min(dynamicValue(dynamic, table.countTag) ?? 0, source.size / codec.sizeOf(table.entry));
  let at = fileOffsetOf(programHeaders, address, codec.sizeOf(table.entry), table.what);
  const records = new RecordReader(source, codec);
  for (let i = 0; i < count; i++) {
    const entry = await records.read(table.entry, at);
    if (table.entryName !== null) {
      const { field, source: kind } = table.entryName;
      references.push({ index: entry[field], source: kind, fieldOffset: at + codec.fieldOffset(table.entry, field) });
    }
    let auxAt = at + entry[table.entryFields.aux];
    for (let j = 0; j < entry[table.entryFields.count]; j++) {
      const aux = await records.read(table.aux, auxAt);
      const name = table.auxFields.name;
      references.push({ index: aux[name], source: table.auxSource, fieldOffset: auxAt + codec.fieldOffset(table.aux, name) });
      if (aux[table.auxFields.next] === 0) break;
      auxAt += aux[table.auxFields.next];
    }
    if (entry[table.entryFields.next] === 0) break;
    at += entry[table.entryFields.next];
  }
  return references;
}
