// resumeOf over the corpus: a file no edit was cut short in has nothing to resume; one cut after its
// `dynamic` phase (tags switched, no cleanup, stale section headers) is noticed and finished by the
// next plan, which leaves no replaced string behind. An in-place edit leaves no stale header: its
// mark on the dynamic array (cleanup-mark.ts) is what is noticed, from before its switch until its
// cleanup is done, even where the switch itself was cut part way.

import { describe, expect, it } from 'vitest';
import { resumeOf, stringStarts } from '../../src/plan/resume-edit.js';
import type { PlannedWrite } from '../../src/plan/plan.js';
import { cleanupMarked } from '../../src/plan/cleanup-mark.js';
import { CORPUS } from './corpus-table.js';
import { corpusBytes } from './helpers/corpus.js';
import { DYN } from '../../src/elf/codec.js';
import { DT } from '../../src/elf/constants.js';
import { applyInMemory, applyPlanInMemory, contains, dynamicStrings, factsOf, planOn } from './helpers/plan-in-memory.js';
import type { ByteString } from '../../src/elf/byte-string.js';
import { bytes } from '../helpers/byte-strings.js';

const LONG = '/nix/store/00000000000000000000000000000000-cuda_compat-12.8/lib:/run/opengl-driver/lib';
const setLong = (editor: { setRunpath(value: ByteString): void }): void => editor.setRunpath(bytes(LONG));

it('stringStarts lists every non-empty string of a table', () => {
  expect(stringStarts(new Uint8Array(Buffer.from('\0ab\0\0c\0', 'latin1')))).toEqual([1, 5]);
  expect(stringStarts(new Uint8Array(0))).toEqual([]);
});

describe.each(CORPUS.filter((file) => file.runpath !== null || file.rpath !== null))('$name', (file) => {
  it('has nothing to resume as built, nor once an edit is done', async () => {
    const bytes = corpusBytes(file.name);
    expect(resumeOf(await factsOf(bytes))).toBeNull();
    expect(resumeOf(await factsOf(applyPlanInMemory(bytes, (await planOn(bytes, setLong)).plan)))).toBeNull();
  });

  it('finishes an edit cut short after the tags switched', async () => {
    const bytes = corpusBytes(file.name);
    const { plan } = await planOn(bytes, setLong);
    expect(plan.tier).toBe('append');
    const cut = plan.writes.findIndex((write) => write.phase !== 'data' && write.phase !== 'headers' && write.phase !== 'dynamic');
    const furthest = Math.max(bytes.length, ...plan.writes.map((write) => write.offset + write.bytes.length));
    const cutShort = applyInMemory(bytes, plan.writes.slice(0, cut), furthest);
    // The loader already sees the new runpath; the old string is still in the file.
    expect((await dynamicStrings(cutShort)).runpath ?? (await dynamicStrings(cutShort)).rpath).toBe(LONG);
    const old = (file.runpath ?? file.rpath) as string;
    expect(contains(cutShort, old)).toBe(true);

    const facts = await factsOf(cutShort);
    const resume = resumeOf(facts);
    expect(resume?.sections[0]?.section.name).toBe('.dynstr');
    expect(resume?.sections[0]?.fields).toEqual({
      sh_offset: facts.dynstr.offset,
      sh_addr: facts.dynstr.vaddr,
      sh_size: facts.dynstr.bytes.length,
    });

    const next = await planOn(cutShort, setLong);
    expect(next.plan.tier).not.toBe('noop');
    const finished = applyPlanInMemory(cutShort, next.plan);
    expect(resumeOf(await factsOf(finished))).toBeNull();
    expect(contains(finished, old)).toBe(false);
    const strings = await dynamicStrings(finished);
    expect(strings.runpath ?? strings.rpath).toBe(LONG);
    expect((await planOn(finished, setLong)).plan.tier).toBe('noop');
  });
});

describe.each(CORPUS.filter((file) => file.runpath !== null || file.rpath !== null))('$name, its runpath removed in place', (file) => {
  const removeRunpath = (editor: { setRunpath(value: string | null): void }): void => editor.setRunpath(null);

  it('is marked from the write before its switch until its cleanup is done', async () => {
    const bytes = corpusBytes(file.name);
    const { plan } = await planOn(bytes, removeRunpath);
    expect(plan.tier).toBe('in-place');
    expect(plan.writes.map((write) => write.phase)).toEqual(['data', 'dynamic', 'cleanup', 'unmark']);
    for (let count = 0; count <= plan.writes.length; count++) {
      const cutShort = applyInMemory(bytes, plan.writes.slice(0, count), plan.newSize);
      const resume = resumeOf(await factsOf(cutShort));
      expect(resume === null, `after ${count} writes`).toBe(count === 0 || count === plan.writes.length);
    }
  });

  // A switch cut part way may leave an array the reader refuses (an entry shifted down, and its old
  // copy still there), so the array is decoded here as the loader walks it: up to the first DT_NULL.
  // Cuts fall where a page ends, which is at an entry boundary of an array aligned to its entry size.
  it('is marked with its switch cut at any entry (where the kernel may stop a write)', async () => {
    const bytes = corpusBytes(file.name);
    const { facts, plan } = await planOn(bytes, removeRunpath);
    const { codec, dynamic } = facts;
    const size = codec.sizeOf(DYN);
    const switchAt = plan.writes.findIndex((write) => write.phase === 'dynamic');
    const switchWrite = plan.writes[switchAt] as PlannedWrite;
    let cuts = 0;
    for (let cut = dynamic.offset; cut < switchWrite.offset + switchWrite.bytes.length; cut += size) {
      if (cut <= switchWrite.offset) continue;
      const part = { ...switchWrite, bytes: switchWrite.bytes.subarray(0, cut - switchWrite.offset) };
      const array = applyInMemory(bytes, [...plan.writes.slice(0, switchAt), part], plan.newSize).subarray(
        dynamic.offset,
        dynamic.offset + dynamic.bytes.length,
      );
      const entries = [];
      for (let at = 0; codec.decode(DYN, array, at).d_tag !== DT.DT_NULL; at += size) entries.push(codec.decode(DYN, array, at));
      expect(cleanupMarked(codec, { ...dynamic, bytes: array, entries }), `the switch cut at 0x${cut.toString(16)}`).toBe(true);
      cuts++;
    }
    expect(cuts).toBeGreaterThan(0);
  });

  it('killed after its switch, is finished by the same edit: the bytes of an uninterrupted run', async () => {
    const bytes = corpusBytes(file.name);
    const { plan } = await planOn(bytes, removeRunpath);
    const switched = plan.writes.findIndex((write) => write.phase === 'dynamic') + 1;
    const cutShort = applyInMemory(bytes, plan.writes.slice(0, switched), plan.newSize);
    const old = (file.runpath ?? file.rpath) as string;
    expect(contains(cutShort, old)).toBe(true);
    const next = await planOn(cutShort, removeRunpath);
    expect(Buffer.compare(applyPlanInMemory(cutShort, next.plan), applyPlanInMemory(bytes, plan))).toBe(0);
  });
});
