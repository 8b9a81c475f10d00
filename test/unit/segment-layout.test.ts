// chooseSegment and layOutRegion over the corpus: how the program header table gets its new entry,
// where the new PT_LOAD goes (page-congruent, the largest dynamic symbol size above every segment, the
// machine's page size), a refusal where none fits, and a second append extending the segment the
// first one added. AppendedRegion's alignment and regionBytes on the side.

import { describe, expect, it } from 'vitest';
import { ET, PF_R, PF_W, PT, machinePageSize } from '../../src/elf/constants.js';
import { DynamicEditor } from '../../src/plan/dynamic-editor.js';
import { currentEntries } from '../../src/plan/edit-facts.js';
import { planEdit } from '../../src/plan/plan-edit.js';
import { shiftForRewrite } from '../../src/plan/shift-for-rewrite.js';
import { AppendedRegion, alignUp, regionBytes } from '../../src/plan/region.js';
import type { EditFacts } from '../../src/plan/edit-facts.js';
import { chooseSegment, type SegmentChoice, type TableStrategy } from '../../src/plan/segment-choice.js';
import { layOutRegion } from '../../src/plan/segment-layout.js';
import { CORPUS } from './corpus-table.js';
import { corpusBytes } from './helpers/corpus.js';
import { applyPlanInMemory, factsOf, planOn } from './helpers/plan-in-memory.js';
import { bytes as textBytes } from '../helpers/byte-strings.js';

// GNU ld puts .gnu.hash/.dynsym right after the table: it grows over them after moving them (and the
// tags) away. lld leaves the table followed by zero padding: it grows where it is.
const STRATEGY: Readonly<Record<string, TableStrategy>> = { 'x86_64-lib-lld.so': 'grow-in-place' };

/** The append tier's segment; every corpus file has one (none needs the whole-file rewrite), from every fact. */
function segmentFor(facts: EditFacts): SegmentChoice {
  const segment = chooseSegment(facts);
  if (segment.kind === 'segment') return segment;
  if (segment.kind === 'needs-rewrite') throw new Error(`the edit needs the whole-file rewrite: ${segment.why}`);
  if (segment.kind === 'needs-facts') throw new Error(`the layout asks for ${segment.facts}, which factsOf reads`);
  throw new Error(`the edit is refused: ${segment.why}`);
}

describe.each(CORPUS)('$name', (file) => {
  it('maps appended data with a new PT_LOAD, page-congruent and above every segment', async () => {
    const bytes = corpusBytes(file.name);
    const facts = await factsOf(bytes);
    const segment = segmentFor(facts);
    expect(segment.strategy).not.toBe('extend');
    const layout = layOutRegion(facts, segment, [{ size: 100, align: 8, writable: true }]);
    // A library's segment starts at the end of the file. An executable whose table moves needs the
    // segment where the kernel computes AT_PHDR from the first PT_LOAD: file offset = address there,
    // which can leave a hole after the old end.
    const executable = file.interpreter !== null;
    if (executable) expect(layout.start).toBeGreaterThanOrEqual(bytes.length);
    else expect(layout.start).toBe(bytes.length);
    const block = layout.blocks[0];
    expect(block?.offset).toBe(alignUp(block?.offset ?? 0, 8));
    expect(layout.strategy).toBe(STRATEGY[file.name] ?? 'grow-after-move');
    expect(layout.table.programHeaders.length).toBe(file.programHeaders.length + 1);

    const page = machinePageSize(file.machine);
    const loads = layout.table.programHeaders.filter((ph) => ph.p_type === PT.PT_LOAD);
    const added = loads.find((ph) => ph.p_offset === layout.start);
    expect(added).toMatchObject({ p_flags: PF_R | PF_W, p_align: page, p_filesz: added?.p_memsz });
    if (added === undefined) return;
    expect(added.p_vaddr % page).toBe(added.p_offset % page);
    if (executable) expect(added.p_vaddr - added.p_offset).toBe(0); // the first PT_LOAD's, in the corpus PIE
    for (const ph of file.programHeaders.filter(([type]) => type === PT.PT_LOAD))
      expect(added.p_vaddr).toBeGreaterThanOrEqual(ph[2] + ph[4]);
    expect(block?.vaddr).toBe(added.p_vaddr + ((block?.offset ?? 0) - added.p_offset));
    expect(layout.fileEnd).toBe(added.p_offset + added.p_filesz);
  });

  // How far a symbol's extent, or a relocation against it, reaches past where it starts: the new
  // segment starts that far above every segment, and no further than the page that takes it.
  it('places the new segment the largest dynamic symbol size above every segment', async () => {
    const bytes = corpusBytes(file.name);
    const facts = await factsOf(bytes);
    expect(facts.largestSymbolSize).toBe(file.largestSymbolSize);
    const page = machinePageSize(file.machine);
    const highestEnd = Math.max(...file.programHeaders.filter(([type]) => type === PT.PT_LOAD).map((ph) => ph[2] + ph[4]));
    for (const reach of [file.largestSymbolSize, 3 * 2 ** 20 + 5]) {
      const withReach = { ...facts, largestSymbolSize: reach };
      const layout = layOutRegion(withReach, segmentFor(withReach), []);
      const added = layout.table.programHeaders.find((ph) => ph.p_type === PT.PT_LOAD && ph.p_offset === layout.start);
      expect(added?.p_vaddr, `reach ${reach}`).toBeGreaterThanOrEqual(highestEnd + reach);
      expect(added?.p_vaddr, `reach ${reach}`).toBeLessThan(alignUp(highestEnd + reach, page) + page);
    }
  });

  // binutils strip lays a segment holding the program header table out again, as far down in memory
  // as it moves it down in the file: by at most the bytes past the last PT_LOAD's file bytes. Those
  // are taken as they are, and as they would be a page and more longer (a file with a longer tail).
  it('places a table moved for good above what strip may move it down by, too', async () => {
    const bytes = corpusBytes(file.name);
    const facts = await factsOf(bytes);
    const page = machinePageSize(file.machine);
    const loads = file.programHeaders.filter(([type]) => type === PT.PT_LOAD);
    for (const longer of [0, page + 0x10]) {
      // No free slot, and nothing after the table that may move: it moves into the new segment.
      const blocked = {
        ...facts,
        fileSize: bytes.length + longer,
        movableRanges: [],
        relocatableSections: [],
        afterProgramHeaders: new Uint8Array(facts.header.e_phentsize).fill(1),
      };
      const layout = layOutRegion(blocked, segmentFor(blocked), []);
      expect(layout.strategy).toBe('move-table');
      const strippable = bytes.length + longer - Math.max(...loads.map((ph) => ph[1] + ph[3]));
      expect(strippable).toBeGreaterThan(longer);
      const bound = Math.max(...loads.map((ph) => ph[2] + ph[4])) + file.largestSymbolSize + strippable;
      const added = layout.table.programHeaders.find((ph) => ph.p_type === PT.PT_LOAD && ph.p_offset === layout.start);
      expect(added?.p_vaddr, `a tail ${longer} bytes longer`).toBeGreaterThanOrEqual(bound);
      expect(added?.p_vaddr, `a tail ${longer} bytes longer`).toBeLessThan(alignUp(bound, page) + page);
    }
  });

  // No tier fits: a returned value the pipeline turns into the file's `unsupported` error, not an exception.
  it('returns a refusal, not an exception, when no new segment fits below 2^53 or in a first page of its own', async () => {
    const facts = await factsOf(corpusBytes(file.name));
    const editor = new DynamicEditor(currentEntries(facts), facts.interpreter?.text ?? null);
    editor.setRunpath(textBytes(`/${'x'.repeat(4000)}`));
    const decision = planEdit({ ...facts, largestSymbolSize: 2 ** 53 }, editor.wanted());
    expect(decision).toMatchObject({ kind: 'unsupported', why: expect.stringMatching(/^no room for a new segment below 2\^53/) });
    expect(file.type).toBe(ET.ET_DYN);
    expect(shiftForRewrite(facts, 'the table cannot grow')).toEqual({
      kind: 'unsupported',
      why: 'the table cannot grow; nor can a whole-file rewrite help: a position-independent file has no addresses free below its first segment',
    });
  });

  it('extends the segment an earlier edit appended', async () => {
    const bytes = corpusBytes(file.name);
    const once = applyPlanInMemory(bytes, (await planOn(bytes, (editor) => editor.setRunpath(textBytes(`/first/${'x'.repeat(64)}`)))).plan);
    const onceFacts = await factsOf(once);
    const segment = segmentFor(onceFacts);
    expect(segment.strategy).toBe('extend');
    expect(layOutRegion(onceFacts, segment, []).strategy).toBe('extend');
    const twice = await planOn(once, (editor) => editor.setRunpath(textBytes(`/second/${'y'.repeat(200)}`)));
    expect(twice.plan.tier).toBe('append');
    expect(twice.plan.newSize).toBeGreaterThan(once.length);
  });
});

describe('AppendedRegion', () => {
  it('aligns each reservation and zeroes the gaps', () => {
    const region = new AppendedRegion(13);
    const a = region.reserve(3, 1);
    const b = region.reserve(4, 8);
    const parts = [
      { offset: a, bytes: Uint8Array.of(1, 2, 3) },
      { offset: b, bytes: Uint8Array.of(4, 5, 6, 7) },
    ];
    expect([a, b, region.endOffset, region.endOffset - region.start]).toEqual([13, 16, 20, 7]);
    expect([...regionBytes(region.start, region.endOffset, parts)]).toEqual([1, 2, 3, 4, 5, 6, 7]);
    const c = region.reserve(1, 16);
    expect(c).toBe(32);
    expect([...regionBytes(region.start, region.endOffset, parts).subarray(7)]).toEqual(new Array(13).fill(0));
  });

  it.each([
    [0, 8, 0],
    [1, 8, 8],
    [8, 8, 8],
    [5, 1, 5],
    [5, 0, 5],
  ])('alignUp(%i, %i) = %i', (value, align, result) => {
    expect(alignUp(value, align)).toBe(result);
  });
});
