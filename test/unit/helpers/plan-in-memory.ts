// Planning an edit on bytes in memory and applying it to a copy, with the project's own reader, editor
// and planner: what the CLI does to a file, minus the file.

import { DT } from '../../../src/elf/constants.js';
import { currentEntries, type EditFacts } from '../../../src/plan/edit-facts.js';
import { readEditFacts, readLaterFact } from '../../../src/edit/read-edit-facts.js';
import { dynamicStringsOf } from '../../../src/elf/elf-image.js';
import { DynamicEditor } from '../../../src/plan/dynamic-editor.js';
import { planEdit } from '../../../src/plan/plan-edit.js';
import type { Plan, PlanDecision, PlannedWrite } from '../../../src/plan/plan.js';
import { readImage } from './corpus.js';

export type Operations = (editor: DynamicEditor) => void;

/** Every fact a plan can ask for, read up front (the pipeline reads the last two only when asked). */
export async function factsOf(bytes: Uint8Array): Promise<EditFacts> {
  const image = await readImage(bytes);
  const facts = await readEditFacts(image);
  return readLaterFact(image.source, await readLaterFact(image.source, facts, 'dynamic-symbols'), 'symbol-table');
}

export async function planOn(bytes: Uint8Array, operations: Operations): Promise<{ facts: EditFacts; plan: Plan }> {
  const facts = await factsOf(bytes);
  const editor = new DynamicEditor(currentEntries(facts), facts.interpreter?.text ?? null);
  operations(editor);
  return { facts, plan: withoutRewrite(planEdit(facts, editor.wanted())) };
}

/** A plan of the first three tiers; a test that gets another decision instead fails, saying which. */
export function withoutRewrite(decision: PlanDecision): Plan {
  if (decision.kind === 'needs-rewrite') throw new Error(`the edit needs the whole-file rewrite: ${decision.why}`);
  if (decision.kind === 'needs-facts') throw new Error(`the plan asks for ${decision.facts}, which factsOf reads`);
  if (decision.kind === 'unsupported') throw new Error(`the edit is refused: ${decision.why}`);
  return decision.plan;
}

/**
 * The bytes after `writes`, in order, cut to `size`: as write/write-at-offsets.ts leaves a file. Writes may
 * reach past `size` (an interim table), so the buffer is as large as the furthest write first.
 */
export function applyInMemory(bytes: Uint8Array, writes: readonly PlannedWrite[], size: number): Uint8Array {
  const end = Math.max(size, bytes.length, ...writes.map((write) => write.offset + write.bytes.length));
  const out = new Uint8Array(end);
  out.set(bytes);
  for (const write of writes) out.set(write.bytes, write.offset);
  return out.slice(0, size);
}

export function applyPlanInMemory(bytes: Uint8Array, plan: Plan): Uint8Array {
  return applyInMemory(bytes, plan.writes, plan.newSize);
}

export interface DynamicStrings {
  readonly needed: readonly string[];
  readonly soname: string | null;
  readonly runpath: string | null;
  readonly rpath: string | null;
}

/** The string-valued dynamic entries as the reader finds them. */
export async function dynamicStrings(bytes: Uint8Array): Promise<DynamicStrings> {
  const image = await readImage(bytes);
  const one = async (tag: number): Promise<string | null> => (await dynamicStringsOf(image, tag))[0] ?? null;
  return {
    needed: await dynamicStringsOf(image, DT.DT_NEEDED),
    soname: await one(DT.DT_SONAME),
    runpath: await one(DT.DT_RUNPATH),
    rpath: await one(DT.DT_RPATH),
  };
}

/** Whether `text` occurs anywhere in the bytes (a dead path left in the file). */
export function contains(bytes: Uint8Array, text: string): boolean {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).includes(Buffer.from(text, 'latin1'));
}
