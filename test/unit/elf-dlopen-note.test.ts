// `.note.dlopen` as the FDO specification lays it out (https://systemd.io/ELF_DLOPEN_METADATA/): the
// notes as the ELF reader's note walker gives them (owner, type, descriptor), the FDO dlopen ones read
// in order and the others left alone; and every way a descriptor can be malformed, each a value naming
// what is wrong. The note walk over a real gcc-built file is tested end to end in
// test/apply-auto-patchelf.test.ts.

import { describe, expect, it } from 'vitest';
import { type ByteString, textToByteString } from '../../src/elf/byte-string.js';
import { type DlopenEntry, dlopenNotes, parseDlopenDescriptor } from '../../src/elf/dlopen-note.js';

const NT_FDO_DLOPEN_METADATA = 0x407c0c0a;
const NT_GNU_BUILD_ID = 3;

const text = (value: string): Uint8Array => new TextEncoder().encode(value);
/** A JSON descriptor as the toolchain writes it: the text and its terminating NUL. */
const json = (value: string): Uint8Array => text(`${value}\0`);
/** A note's owner, written as ASCII text. */
const owner = (name: string): ByteString => textToByteString(name);
const dlopenNote = (descriptor: string): { owner: ByteString; type: number; descriptor: Uint8Array } => ({
  owner: owner('FDO'),
  type: NT_FDO_DLOPEN_METADATA,
  descriptor: json(descriptor),
});

const BPF_JSON = '[{"feature":"bpf","description":"BPF","priority":"suggested","soname":["libbpf.so.1","libbpf.so.0"]}]';

/** An entry without a priority or a feature: the specification's default priority. */
const entry = (...sonames: string[]): DlopenEntry => ({ sonames: sonames.map(textToByteString), priority: 'recommended', feature: null });

describe('.note.dlopen notes', () => {
  it('reads the FDO dlopen note among the others: the alternatives in order, the priority and the feature', () => {
    const buildId = { owner: owner('GNU'), type: NT_GNU_BUILD_ID, descriptor: new Uint8Array(20) };
    expect(dlopenNotes([buildId, dlopenNote(BPF_JSON)])).toEqual({
      entries: [{ sonames: ['libbpf.so.1', 'libbpf.so.0'], priority: 'suggested', feature: 'bpf' }],
      malformed: [],
    });
  });

  it('one note per dependency or one for all: every entry of every FDO dlopen note, in order', () => {
    const notes = [
      dlopenNote('[{"soname":["libzstd.so.1"]},{"soname":["liblz4.so.1"],"priority":"required"}]'),
      // Another owner's note of the same type, and an FDO note of another type: not dlopen metadata.
      { owner: owner('GNU'), type: NT_FDO_DLOPEN_METADATA, descriptor: json('[{"soname":["libnot.so"]}]') },
      { owner: owner('FDO'), type: 0xcafe1a7e, descriptor: json('{"type":"rpm","name":"x"}') },
      dlopenNote('[{"soname":["libarchive.so.13"],"x-vendor-key":{"any":[1]}}]'),
    ];
    expect(dlopenNotes(notes)).toEqual({
      entries: [entry('libzstd.so.1'), { ...entry('liblz4.so.1'), priority: 'required' }, entry('libarchive.so.13')],
      malformed: [],
    });
  });

  it('a malformed note is reported and ignored; the notes around it still count', () => {
    const notes = [dlopenNote('[{"soname":["liba.so"]}]'), dlopenNote('[{"soname":"libb.so"}]'), dlopenNote('[{"soname":["libc.so"]}]')];
    expect(dlopenNotes(notes)).toEqual({
      entries: [entry('liba.so'), entry('libc.so')],
      malformed: ['.note.dlopen note 2: entry 0: no "soname" array'],
    });
  });

  it('a file without notes has no dlopen dependencies', () => {
    expect(dlopenNotes([])).toEqual({ entries: [], malformed: [] });
  });
});

describe('an FDO dlopen descriptor', () => {
  it('is text up to its first NUL; a missing terminator is tolerated', () => {
    const padded = new Uint8Array([...json('[{"soname":["libx.so.1"]}]'), 0, 0, 0]);
    expect(parseDlopenDescriptor(padded)).toEqual({ ok: true, entries: [entry('libx.so.1')] });
    expect(parseDlopenDescriptor(text('[{"soname":["libx.so.1"]}]'))).toEqual({ ok: true, entries: [entry('libx.so.1')] });
    expect(parseDlopenDescriptor(json('[]'))).toEqual({ ok: true, entries: [] });
  });

  it('gives names as byte strings, as DT_NEEDED names are', () => {
    expect(parseDlopenDescriptor(json('[{"soname":["libé.so"]}]'))).toEqual({ ok: true, entries: [entry('libé.so')] });
  });

  it('a priority or feature that is not text is the default, and no feature', () => {
    expect(parseDlopenDescriptor(json('[{"soname":["libx.so"],"priority":3,"feature":["a"]}]'))).toEqual({
      ok: true,
      entries: [entry('libx.so')],
    });
  });

  it.each([
    ['not UTF-8', new Uint8Array([0x5b, 0xff, 0x5d, 0]), 'the descriptor is not UTF-8 text'],
    ['empty', new Uint8Array(8), /^the descriptor is not JSON \(/],
    ['truncated JSON', json('[{"soname":["libx.so"]'), /^the descriptor is not JSON \(/],
    ['garbage after the JSON', json('[] x'), /^the descriptor is not JSON \(/],
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
