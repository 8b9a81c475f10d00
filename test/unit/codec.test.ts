// The codec against a reference written field by field with BigInt DataView calls: every record layout,
// in ELF32 and ELF64, little and big endian, with values at the edges of each field's width (a
// negative sxword, 2^53 - 1 in a 64-bit field), decodes what it encodes and encodes the bytes a
// reference writer gives.

import { describe, expect, it } from 'vitest';
import { DYN, EHDR, ElfCodec, PHDR, SHDR, SYM, VERDAUX, VERDEF, VERNAUX, VERNEED, type RecordLayout } from '../../src/elf/codec.js';

const LAYOUTS: readonly RecordLayout<string>[] = [EHDR, PHDR, SHDR, DYN, SYM, VERNEED, VERNAUX, VERDEF, VERDAUX];
const FLAVOURS = [
  { elfClass: 32, littleEndian: true },
  { elfClass: 32, littleEndian: false },
  { elfClass: 64, littleEndian: true },
  { elfClass: 64, littleEndian: false },
] as const;

type FieldType = 'u8' | 'half' | 'word' | 'addr' | 'off' | 'xword' | 'sxword';

function widthOf(type: FieldType, elfClass: 32 | 64): number {
  return type === 'u8' ? 1 : type === 'half' ? 2 : type === 'word' ? 4 : elfClass / 8;
}

/** The largest value of a field, or the most negative for a signed one, chosen per field index. */
function edgeValue(type: FieldType, width: number, index: number): number {
  if (type === 'sxword') return index % 2 === 0 ? -2 : width === 8 ? -(2 ** 40) - 3 : -(2 ** 31);
  if (width === 8) return index % 2 === 0 ? Number.MAX_SAFE_INTEGER : 2 ** 32 + index;
  return 2 ** (8 * width) - 1 - index;
}

/** What a reference writer makes of `record`, field by field. */
function referenceBytes(
  fields: readonly (readonly [string, FieldType])[],
  elfClass: 32 | 64,
  le: boolean,
  record: Record<string, number>,
): Uint8Array {
  const sizes = fields.map(([, type]) => widthOf(type, elfClass));
  const bytes = new Uint8Array(sizes.reduce((a, b) => a + b, 0));
  const view = new DataView(bytes.buffer);
  let at = 0;
  fields.forEach(([name, type], i) => {
    const width = sizes[i] ?? 0;
    const value = record[name] ?? 0;
    if (width === 1) view.setUint8(at, value);
    else if (width === 2) view.setUint16(at, value, le);
    else if (width === 4) view.setUint32(at, value >>> 0, le);
    else if (type === 'sxword') view.setBigInt64(at, BigInt(value), le);
    else view.setBigUint64(at, BigInt(value), le);
    at += width;
  });
  return bytes;
}

describe('ElfCodec', () => {
  for (const { elfClass, littleEndian } of FLAVOURS) {
    for (const layout of LAYOUTS) {
      it(`${layout.name}, ELF${elfClass} ${littleEndian ? 'LE' : 'BE'}: encodes as the reference and decodes back`, () => {
        const codec = new ElfCodec(elfClass, littleEndian);
        const fields = (elfClass === 64 ? layout.fields64 : layout.fields32) as readonly (readonly [string, FieldType])[];
        const record = Object.fromEntries(fields.map(([name, type], i) => [name, edgeValue(type, widthOf(type, elfClass), i)]));
        const expected = referenceBytes(fields, elfClass, littleEndian, record);
        expect(codec.sizeOf(layout)).toBe(expected.length);
        const bytes = new Uint8Array(expected.length + 3);
        codec.encode(layout, record, bytes, 3);
        expect(bytes.subarray(3)).toEqual(expected);
        expect(codec.decode(layout, bytes, 3)).toEqual(record);
        expect(Object.keys(codec.decode(layout, bytes, 3))).toEqual(fields.map(([name]) => name));
      });
    }
  }

  it('leaves fields missing from a partial record as they are', () => {
    const codec = new ElfCodec(64, true);
    const bytes = codec.encodeRecord(DYN, { d_tag: 1, d_val: 7 });
    codec.encode(DYN, { d_val: 9 }, bytes, 0);
    expect(codec.decode(DYN, bytes, 0)).toEqual({ d_tag: 1, d_val: 9 });
  });

  it('refuses a value that is not an integer, a record that does not fit, and one past the bytes read', () => {
    const codec = new ElfCodec(32, false);
    expect(() => codec.encodeRecord(DYN, { d_tag: 1.5, d_val: 0 })).toThrow(new RangeError('d_tag = 1.5 is not an integer'));
    expect(() => codec.encode(DYN, { d_tag: 1 }, new Uint8Array(7), 0)).toThrow(RangeError);
    expect(() => codec.decode(DYN, new Uint8Array(8), 1)).toThrow(/runs past the end of the data read/);
  });
});
