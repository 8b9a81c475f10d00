// resumeOf over the corpus: a file no edit was cut short in has nothing to resume; one cut after its
// `dynamic` phase (tags switched, no cleanup, stale section headers) is noticed and finished by the
// next plan, which leaves no replaced string behind.

import { describe, expect, it } from 'vitest';
import { resumeOf, stringStarts } from '../../src/plan/resume-edit.js';
import { CORPUS } from './corpus-table.js';
import { corpusBytes } from './helpers/corpus.js';
import { applyInMemory, applyPlanInMemory, contains, dynamicStrings, factsOf, planOn } from './helpers/plan-in-memory.js';

const LONG = '/nix/store/00000000000000000000000000000000-cuda_compat-12.8/lib:/run/opengl-driver/lib';
const setLong = (editor: { setRunpath(value: string): void }): void => editor.setRunpath(LONG);

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
    expect(resume?.sections[0]?.fields).toEqual({ sh_offset: facts.dynstr.offset, sh_addr: facts.dynstr.vaddr, sh_size: facts.dynstr.bytes.length });

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
