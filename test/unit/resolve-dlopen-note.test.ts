// `.note.dlopen` as the FDO specification lays it out (https://systemd.io/ELF_DLOPEN_METADATA/): notes
// built here byte by byte (n_namesz, n_descsz, n_type, "FDO\0", the zero-terminated JSON padded to 4),
// checked against the PT_NOTE segment gcc 12 and binutils wrote for a shared library, then read back
// in both byte orders and both note alignments; and every way a descriptor can be malformed, each a
// value naming what is wrong.

import { describe, expect, it } from 'vitest';
import { textToByteString } from '../../src/elf/byte-string.js';
import { parseDlopenDescriptor, parseDlopenNotes } from '../../src/resolve/dlopen-note.js';

const NT_FDO_DLOPEN_METADATA = 0x407c0c0a;
const NT_GNU_BUILD_ID = 3;
const NT_GNU_PROPERTY_TYPE_0 = 5;

interface NoteSpec {
  readonly owner: string;
  readonly type: number;
  readonly descriptor: Uint8Array;
}

const text = (value: string): Uint8Array => new TextEncoder().encode(value);
/** A JSON descriptor as the toolchain writes it: the text and its terminating NUL. */
const json = (value: string): Uint8Array => text(`${value}\0`);
const hex = (value: string): Uint8Array => Uint8Array.from(value.match(/../g) ?? [], (byte) => Number.parseInt(byte, 16));

/** Notes laid out as in a PT_NOTE segment: each name and descriptor padded to `alignment`. */
function noteArea(notes: readonly NoteSpec[], littleEndian = true, alignment = 4): Uint8Array {
  const pad = (length: number): number => Math.ceil(length / alignment) * alignment;
  const parts = notes.map(({ owner, type, descriptor }) => {
    const name = text(`${owner}\0`);
    const bytes = new Uint8Array(pad(pad(12 + name.length) + descriptor.length));
    const view = new DataView(bytes.buffer);
    view.setUint32(0, name.length, littleEndian);
    view.setUint32(4, descriptor.length, littleEndian);
    view.setUint32(8, type, littleEndian);
    bytes.set(name, 12);
    bytes.set(descriptor, pad(12 + name.length));
    return bytes;
  });
  const area = new Uint8Array(parts.reduce((sum, part) => sum + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    area.set(part, offset);
    offset += part.length;
  }
  return area;
}

// `gcc -shared` of a file holding one FDO note written as the specification's example (libbpf.so.1,
// then libbpf.so.0): the whole PT_NOTE segment, the build ID note first (readelf -lW: 0x9c bytes, align 4).
const BUILD_ID = hex('8a6167342e06976116db8b992dd286add223f8f2');
const BPF_JSON = '[{"feature":"bpf","description":"BPF","priority":"suggested","soname":["libbpf.so.1","libbpf.so.0"]}]';
const GCC_PT_NOTE = hex(
  '040000001400000003000000474e55008a6167342e06976116db8b992dd286add223f8f204000000660000000a0c7c4046444f00' +
    '5b7b2266656174757265223a22627066222c226465736372697074696f6e223a22425046222c227072696f72697479223a22737567676573746564222c' +
    '22736f6e616d65223a5b226c69626270662e736f2e31222c226c69626270662e736f2e30225d7d5d000000',
);
const GCC_NOTES: readonly NoteSpec[] = [
  { owner: 'GNU', type: NT_GNU_BUILD_ID, descriptor: BUILD_ID },
  { owner: 'FDO', type: NT_FDO_DLOPEN_METADATA, descriptor: json(BPF_JSON) },
];

describe('.note.dlopen notes', () => {
  it('the notes built here are the bytes gcc and binutils write', () => {
    expect(noteArea(GCC_NOTES)).toEqual(GCC_PT_NOTE);
  });

  it("reads the toolchain's PT_NOTE segment: other notes skipped, the alternatives in order", () => {
    expect(parseDlopenNotes(GCC_PT_NOTE, true, 4)).toEqual({ dependencies: [['libbpf.so.1', 'libbpf.so.0']], malformed: [] });
  });

  it('reads big-endian files, and 8-aligned note areas (as readelf pads them)', () => {
    expect(parseDlopenNotes(noteArea(GCC_NOTES, false), false, 4).dependencies).toEqual([['libbpf.so.1', 'libbpf.so.0']]);
    const withProperty: NoteSpec[] = [{ owner: 'GNU', type: NT_GNU_PROPERTY_TYPE_0, descriptor: new Uint8Array(16) }, ...GCC_NOTES];
    expect(parseDlopenNotes(noteArea(withProperty, true, 8), true, 8).dependencies).toEqual([['libbpf.so.1', 'libbpf.so.0']]);
    // sh_addralign 0 or 1 means no constraint: notes are still 4-byte padded.
    expect(parseDlopenNotes(GCC_PT_NOTE, true, 1).dependencies).toEqual([['libbpf.so.1', 'libbpf.so.0']]);
  });

  it('one note per dependency or one for all: every entry of every FDO dlopen note, in order', () => {
    const area = noteArea([
      {
        owner: 'FDO',
        type: NT_FDO_DLOPEN_METADATA,
        descriptor: json('[{"soname":["libzstd.so.1"]},{"soname":["liblz4.so.1"],"priority":"required"}]'),
      },
      // Another owner's note of the same type, and an FDO note of another type: not dlopen metadata.
      { owner: 'GNU', type: NT_FDO_DLOPEN_METADATA, descriptor: json('[{"soname":["libnot.so"]}]') },
      { owner: 'FDO', type: 0xcafe1a7e, descriptor: json('{"type":"rpm","name":"x"}') },
      { owner: 'FDO', type: NT_FDO_DLOPEN_METADATA, descriptor: json('[{"soname":["libarchive.so.13"],"x-vendor-key":{"any":[1]}}]') },
    ]);
    expect(parseDlopenNotes(area, true, 4)).toEqual({
      dependencies: [['libzstd.so.1'], ['liblz4.so.1'], ['libarchive.so.13']],
      malformed: [],
    });
  });

  it('a malformed note is reported and ignored; the notes around it still count', () => {
    const area = noteArea([
      { owner: 'FDO', type: NT_FDO_DLOPEN_METADATA, descriptor: json('[{"soname":["liba.so"]}]') },
      { owner: 'FDO', type: NT_FDO_DLOPEN_METADATA, descriptor: json('[{"soname":"libb.so"}]') },
      { owner: 'FDO', type: NT_FDO_DLOPEN_METADATA, descriptor: json('[{"soname":["libc.so"]}]') },
    ]);
    expect(parseDlopenNotes(area, true, 4)).toEqual({
      dependencies: [['liba.so'], ['libc.so']],
      malformed: ['note at offset 44: entry 0: no "soname" array'],
    });
  });

  it('a note that runs past the end, or a piece too short for a header, ends the area', () => {
    const truncated = GCC_PT_NOTE.subarray(0, GCC_PT_NOTE.length - 8);
    expect(parseDlopenNotes(truncated, true, 4)).toEqual({
      dependencies: [],
      malformed: ['note at offset 36: name (4 bytes) and descriptor (102 bytes) run past the end (148 bytes)'],
    });
    const withTail = new Uint8Array([...GCC_PT_NOTE, 4, 0, 0, 0]);
    expect(parseDlopenNotes(withTail, true, 4)).toEqual({
      dependencies: [['libbpf.so.1', 'libbpf.so.0']],
      malformed: ['note at offset 156: 4 bytes left, less than a note header'],
    });
    // A size read in the wrong byte order is a huge size, not a read past the buffer.
    expect(parseDlopenNotes(GCC_PT_NOTE, false, 4).malformed).toEqual([
      'note at offset 0: name (67108864 bytes) and descriptor (335544320 bytes) run past the end (156 bytes)',
    ]);
    expect(parseDlopenNotes(GCC_PT_NOTE, true, 2)).toEqual({ dependencies: [], malformed: ['notes aligned to 2 bytes (4 or 8 expected)'] });
  });
});

describe('an FDO dlopen descriptor', () => {
  it('is text up to its first NUL; a missing terminator is tolerated', () => {
    const padded = new Uint8Array([...json('[{"soname":["libx.so.1"]}]'), 0, 0, 0]);
    expect(parseDlopenDescriptor(padded)).toEqual({ ok: true, dependencies: [['libx.so.1']] });
    expect(parseDlopenDescriptor(text('[{"soname":["libx.so.1"]}]'))).toEqual({ ok: true, dependencies: [['libx.so.1']] });
    expect(parseDlopenDescriptor(json('[]'))).toEqual({ ok: true, dependencies: [] });
  });

  it('gives names as byte strings, as DT_NEEDED names are', () => {
    expect(parseDlopenDescriptor(json('[{"soname":["libé.so"]}]'))).toEqual({ ok: true, dependencies: [[textToByteString('libé.so')]] });
  });

  it.each([
    ['not UTF-8', new Uint8Array([0x5b, 0xff, 0x5d, 0]), 'the descriptor is not UTF-8 text'],
    ['empty', new Uint8Array(8), /^malformed JSON \(/],
    ['truncated JSON', json('[{"soname":["libx.so"]'), /^malformed JSON \(/],
    ['garbage after the JSON', json('[] x'), /^malformed JSON \(/],
    ["an object, not an array (the specification's first draft)", json('{"soname":"libx.so"}'), 'the JSON is not an array'],
    ['an entry that is a string', json('["libx.so"]'), 'entry 0: not a JSON object'],
    ['an entry that is null', json('[{"soname":["a.so"]},null]'), 'entry 1: not a JSON object'],
    ['an entry that is an array', json('[["libx.so"]]'), 'entry 0: not a JSON object'],
    ['an entry without soname', json('[{"feature":"x"}]'), 'entry 0: no "soname" array'],
    ['a soname that is a string', json('[{"soname":"libx.so"}]'), 'entry 0: no "soname" array'],
    ['an empty soname array', json('[{"soname":[]}]'), 'entry 0: an empty "soname" array'],
    ['a soname that is a number', json('[{"soname":["libx.so",1]}]'), 'entry 0: a "soname" that is not a non-empty string'],
    ['an empty soname', json('[{"soname":[""]}]'), 'entry 0: a "soname" that is not a non-empty string'],
  ])('malformed: %s', (_what, descriptor, error) => {
    const result = parseDlopenDescriptor(descriptor);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toMatch(error);
  });
});
