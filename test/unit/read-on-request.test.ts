// What a plan reads only on request, on the corpus: the .dynsym entries are asked for exactly when a
// string may be freed, slack may hold a new one, or a new segment is placed (the largest symbol size
// sets how far above the others), the .symtab bytes when sections can move, and the plan made from
// facts read on request is the plan made from every fact.

import { describe, expect, it } from 'vitest';
import { readEditFacts, readLaterFact } from '../../src/edit/read-edit-facts.js';
import { DynamicEditor } from '../../src/plan/dynamic-editor.js';
import { currentEntries, type EditFacts, type LaterFact } from '../../src/plan/edit-facts.js';
import { planEdit } from '../../src/plan/plan-edit.js';
import type { PlanDecision } from '../../src/plan/plan.js';
import { CORPUS } from './corpus-table.js';
import { corpusBytes, readImage } from './helpers/corpus.js';
import { factsOf, withoutRewrite, type Operations } from './helpers/plan-in-memory.js';
import { bytes } from '../helpers/byte-strings.js';

const COMPAT = '/nix/store/00000000000000000000000000000000-cuda_compat-12.8/lib:/run/opengl-driver/lib';

interface Case {
  readonly label: string;
  readonly operations: Operations;
  /** Whether the edit frees a string of this file (its runpath, where it has one). */
  readonly frees: (hasRunpath: boolean) => boolean;
}

const CASES: readonly Case[] = [
  { label: 'a long CUDA runpath', operations: (editor) => editor.setRunpath(bytes(COMPAT)), frees: (hasRunpath) => hasRunpath },
  { label: 'one more DT_NEEDED', operations: (editor) => editor.addNeeded(bytes('libcuda-patchelf-test.so.1')), frees: () => false },
  { label: 'no runpath', operations: (editor) => editor.setRunpath(null), frees: (hasRunpath) => hasRunpath },
];

/** Plans as the pipeline does: facts read on request, in the order the planner asks for them. */
async function planOnRequest(
  bytes: Uint8Array,
  first: EditFacts,
  operations: Operations,
): Promise<{ asked: LaterFact[]; decision: PlanDecision }> {
  const image = await readImage(bytes);
  const editor = new DynamicEditor(currentEntries(first), first.interpreter?.text ?? null);
  operations(editor);
  const wanted = editor.wanted();
  const asked: LaterFact[] = [];
  let facts = first;
  let decision = planEdit(facts, wanted);
  while (decision.kind === 'needs-facts') {
    expect(asked, `asked twice for ${decision.facts}`).not.toContain(decision.facts);
    asked.push(decision.facts);
    facts = await readLaterFact(image.source, facts, decision.facts);
    decision = planEdit(facts, wanted);
  }
  return { asked, decision };
}

describe.each(CORPUS)('$name', (file) => {
  it.each(CASES)('$label: the plan from facts read on request is the plan from every fact', async ({ operations, frees }) => {
    const bytes = corpusBytes(file.name);
    const first = await readEditFacts(await readImage(bytes));
    expect(first.references.symbolNames).toBeNull();
    expect(first.largestSymbolSize).toBeNull();
    expect(first.symbolTable?.bytes ?? null).toBeNull();
    const { asked, decision } = await planOnRequest(bytes, first, operations);

    const every = await factsOf(bytes);
    const editor = new DynamicEditor(currentEntries(every), every.interpreter?.text ?? null);
    operations(editor);
    const plan = withoutRewrite(planEdit(every, editor.wanted()));
    expect(withoutRewrite(decision)).toEqual(plan);

    // The corpus tables have no zeroed slack: the entries are asked for only where a string is freed,
    // or where the append tier adds a segment (the corpus files have none an earlier edit appended).
    const hasRunpath = file.runpath !== null || file.rpath !== null;
    expect(asked.includes('dynamic-symbols')).toBe(frees(hasRunpath) || plan.tier === 'append');
    // Sections can move only when tables are appended; the .symtab is then read where the file has one.
    const sectionsMove = plan.tier === 'append';
    expect(asked.includes('symbol-table')).toBe(sectionsMove && first.symbolTable !== null);
  });
});
