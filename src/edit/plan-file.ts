// The one per-file pipeline every command shares up to the write, from an open ELF file: the skip
// policy → read the planner's facts → run the caller's operations once → decide the tier and plan →
// read the plan back. How a file is opened is the caller's (a single-file command by its name, the
// batch as the walk lists it: batch/walked-file.ts); writing the plan is write/'s (commitPlan). What
// stops an edit comes back as a value (FilePlan); only a bug is thrown.

import type { Stats } from 'node:fs';
import { type ByteSource, type ElfFile, type ElfImage, readElfImage, withElfFile } from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { DynamicEditor } from '../plan/dynamic-editor.js';
import { currentEntries, type CurrentEntry, type EditFacts, type LaterFact } from '../plan/edit-facts.js';
import { planEdit } from '../plan/plan-edit.js';
import type { NeedsRewrite, Plan, Planned } from '../plan/plan.js';
import { PlannedByteSource } from '../plan/planned-byte-source.js';
import { shiftForRewrite } from '../plan/shift-for-rewrite.js';
import { ShiftedByteSource } from '../plan/shifted-byte-source.js';
import { isStringEntry, type WantedDynamic, type WantedEntry } from '../plan/wanted.js';
import { readEditFacts, readLaterFact } from './read-edit-facts.js';

/**
 * The operations to carry out on a file's dynamic array, run once per file; they may read the image
 * (e_machine, say), and what they return comes back with the plan.
 */
export type EditOperations<T = void> = (editor: DynamicEditor, image: ElfImage) => T | Promise<T>;

export interface PlannedFile<T> extends PlannedEdit<T> {
  readonly kind: 'planned';
  /** The file as it was opened: the write checks it is still that file. */
  readonly stats: Stats;
}

/** What the pipeline makes of one open ELF file: a plan, or the error that stops this edit of it, as a value naming the file. */
export type FilePlan<T> = PlannedFile<T> | { readonly kind: 'failed'; readonly error: CudaPatchelfError };

/**
 * A file named on the command line: a symbolic link is followed, as patchelf does, and a file that
 * cannot be edited (not ELF, static, debug-info…) fails. Nothing is written. Errors name the file.
 */
export async function planCommandLineFile<T>(path: string, operations: EditOperations<T>): Promise<PlannedFile<T>> {
  const planned = await withElfFile(path, (file) => planElfFile(file, operations));
  if (planned.kind === 'failed') throw planned.error;
  return planned;
}

/**
 * The pipeline over an open ELF file (whether `apply` would leave it alone is the caller's question:
 * skip-reason.ts): what stops the edit (the file's structures, an edit no tier can make) comes back as
 * the file's error. Only an error cuda-patchelf does not expect (a bug) is thrown.
 */
export async function planElfFile<T>(file: ElfFile, operations: EditOperations<T>): Promise<FilePlan<T>> {
  try {
    return { kind: 'planned', stats: file.stats, ...(await planEditOf(file.image, operations)) };
  } catch (error) {
    if (!(error instanceof CudaPatchelfError)) throw error;
    return { kind: 'failed', error: error.withFile(file.path) };
  }
}

export interface PlannedEdit<T = void> {
  readonly facts: EditFacts;
  readonly plan: Plan;
  /** What the operations returned. */
  readonly answer: T;
}

/**
 * Reads what planning needs from an open image, runs the operations once and plans what they asked
 * for. A plan is then read back as the file would be after it (nothing written yet): a hostile file
 * can make a structure the rewriter does not manage depend on bytes it moves or overwrites, and such
 * a plan is refused instead of leaving a file that no longer reads.
 */
export async function planEditOf<T>(image: ElfImage, operations: EditOperations<T>): Promise<PlannedEdit<T>> {
  const facts = await readEditFacts(image);
  const editor = new DynamicEditor(currentEntries(facts), facts.interpreter?.text ?? null);
  const answer = await operations(editor, image);
  const wanted = editor.wanted();
  const decided = await decide(image.source, facts, wanted);
  const plan =
    decided.decision.kind === 'needs-rewrite'
      ? await planRewrite(image, decided.facts, decided.decision.why, wanted)
      : decided.decision.plan;
  if (plan.tier !== 'noop' && plan.tier !== 'rewrite') await checkReadsBack(image, plan, wanted);
  return { facts: decided.facts, plan, answer };
}

/**
 * Plans on the facts read so far; when the plan asks for a fact read only on request (the .dynsym
 * names, the .symtab bytes), reads it and plans again: each is asked for once at most. An edit no tier
 * can make becomes the file's `unsupported` error here.
 */
async function decide(
  source: ByteSource,
  first: EditFacts,
  wanted: WantedDynamic,
): Promise<{ facts: EditFacts; decision: Planned | NeedsRewrite }> {
  let facts = first;
  const asked = new Set<LaterFact>();
  for (;;) {
    const decision = planEdit(facts, wanted);
    if (decision.kind === 'unsupported') throw new CudaPatchelfError('unsupported', decision.why);
    if (decision.kind !== 'needs-facts') return { facts, decision };
    if (asked.has(decision.facts)) throw new Error(`planEdit asked twice for ${decision.facts}`);
    asked.add(decision.facts);
    facts = await readLaterFact(source, facts, decision.facts);
  }
}

/**
 * Tier 4: the same wanted dynamic array planned on the file as a rewrite lays it out (a first page of
 * its own for the headers, the old file behind it), where the program header table grows in place.
 * What the operations asked for is the same there (string indices and addresses do not move, only
 * file offsets do), so they do not run again. The plan is read back on that layout like any other.
 */
async function planRewrite(image: ElfImage, facts: EditFacts, why: string, wanted: WantedDynamic): Promise<Plan> {
  const shifted = shiftForRewrite(facts, why);
  if (shifted.kind === 'unsupported') throw new CudaPatchelfError('unsupported', shifted.why);
  const source = new PlannedByteSource(new ShiftedByteSource(image.source, shifted.shift), shifted.writes, shifted.size);
  const shiftedImage = await readElfImage(source);
  const { decision } = await decide(source, await readEditFacts(shiftedImage), wanted);
  if (decision.kind === 'needs-rewrite') throw new CudaPatchelfError('unsupported', decision.why);
  const plan = decision.plan;
  if (plan.tier !== 'noop') await checkReadsBack(shiftedImage, plan, wanted);
  return { tier: 'rewrite', writes: [...shifted.writes, ...plan.writes], newSize: plan.newSize, shift: shifted.shift };
}

async function checkReadsBack(image: ElfImage, plan: Plan, wanted: WantedDynamic): Promise<void> {
  let mismatch: string | null;
  try {
    const after = await readElfImage(new PlannedByteSource(image.source, plan.writes, plan.newSize));
    mismatch =
      firstMismatch(wanted.entries, currentEntries(await readEditFacts(after, 'check'))) ??
      (after.interpreter === wanted.interpreter ? null : 'the interpreter path (PT_INTERP) does not read back as planned');
  } catch (error) {
    if (!(error instanceof CudaPatchelfError)) throw error;
    mismatch = error.message;
  }
  if (mismatch !== null) throw new CudaPatchelfError('unsupported', `the edited file would not read back (${mismatch}); left alone`);
}

/** Where the dynamic array read back from a plan differs from the one asked for: tags, and strings. */
function firstMismatch(wanted: readonly WantedEntry[], got: readonly CurrentEntry[]): string | null {
  if (got.length !== wanted.length) return `${got.length} dynamic entries instead of ${wanted.length}`;
  for (const [index, entry] of wanted.entries()) {
    const read = got[index];
    if (read?.d_tag !== entry.d_tag || (isStringEntry(entry) && read.text !== entry.text))
      return `dynamic entry ${index} does not read back as planned`;
  }
  return null;
}
