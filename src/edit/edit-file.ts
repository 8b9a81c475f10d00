// Editing one file: read what is needed, plan, and write — or refuse with the file untouched.

import { copyFile, rm } from 'node:fs/promises';
import { FileByteSource } from '../elf/byte-source.js';
import { ioError } from '../errors/io-error.js';
import { currentEntries, readEditFacts, type CurrentEntry, type EditFacts } from '../elf/edit-facts.js';
import { readElfImage, type ElfImage } from '../elf/elf-image.js';
import { PlannedByteSource } from '../elf/planned-byte-source.js';
import { ShiftedByteSource } from '../elf/shifted-byte-source.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { DynamicEditor } from '../plan/dynamic-editor.js';
import { planEdit } from '../plan/plan-edit.js';
import { TableHasNoRoom } from '../plan/segment-layout.js';
import { shiftForRewrite } from '../plan/shift-for-rewrite.js';
import type { Plan, Tier } from '../plan/plan.js';
import { isStringEntry, type WantedDynamic, type WantedEntry } from '../plan/wanted.js';
import { withFileLock } from '../write/file-lock.js';
import { writePlan } from '../write/write-plan.js';

export interface EditOptions {
  /** Write the result to this file and leave the input alone. */
  readonly output?: string;
  /** fsync between the data and the header writes. */
  readonly durable?: boolean;
  /** Edit files without write permission (the mode is restored afterwards). */
  readonly makeWritable?: boolean;
  /** Plan only. */
  readonly dryRun?: boolean;
}

export interface EditResult {
  readonly file: string;
  readonly tier: Tier;
  readonly bytesWritten: number;
  readonly plan: Plan;
  readonly oldSize: number;
}

/** The operations to carry out on a file's dynamic array; may read the image (e.g. e_machine). */
export type EditOperations = (editor: DynamicEditor, image: ElfImage) => void | Promise<void>;

/** Reads, plans and writes one file. Errors name the file; a refused file is left byte-identical. */
export async function editElfFile(path: string, operations: EditOperations, options: EditOptions = {}): Promise<EditResult> {
  try {
    return await edit(path, operations, options);
  } catch (error) {
    throw error instanceof CudaPatchelfError ? error.withFile(path) : error;
  }
}

async function edit(path: string, operations: EditOperations, options: EditOptions): Promise<EditResult> {
  const source = await FileByteSource.open(path);
  let planned: PlannedEdit;
  try {
    planned = await planEditOf(await readElfImage(source), operations);
  } finally {
    await source.close();
  }
  const { plan, facts } = planned;
  const result = (written: number): EditResult => ({ file: path, tier: plan.tier, bytesWritten: written, plan, oldSize: facts.fileSize });
  if (options.dryRun) return result(0);
  if (options.output !== undefined) {
    await copyTo(path, options.output);
    try {
      // The copy is ours to write, whatever the input's mode (which it keeps).
      return result(await writePlan(options.output, plan, null, { ...options, makeWritable: true }));
    } catch (error) {
      await rm(options.output, { force: true });
      throw error;
    }
  }
  if (plan.tier === 'noop') return result(0);
  // Under the lock, writePlan's check sees any write another cuda-patchelf made since this one read the file.
  return result(await withFileLock(path, source.stats, () => writePlan(path, plan, source.stats, options)));
}

export interface PlannedEdit {
  readonly facts: EditFacts;
  readonly plan: Plan;
}

/**
 * Reads what planning needs from an open image, runs the operations and plans them. A plan is then
 * read back as the file would be after it (nothing written yet): a hostile file can make a structure
 * the rewriter does not manage depend on bytes it moves or overwrites, and such a plan is refused
 * instead of leaving a file that no longer reads.
 */
export async function planEditOf(image: ElfImage, operations: EditOperations): Promise<PlannedEdit> {
  const facts = await readEditFacts(image);
  const editor = new DynamicEditor(currentEntries(facts));
  await operations(editor, image);
  return planWanted(image, facts, editor.wanted(), true);
}

/**
 * Plans the wanted dynamic array on an image whose facts are read. The operations ran once, before:
 * what they asked for is the same on the rewrite's layout (string indices and addresses do not move
 * there, only file offsets do), so the rewrite plans the same `wanted` and never runs them again.
 */
async function planWanted(image: ElfImage, facts: EditFacts, wanted: WantedDynamic, mayRewrite: boolean): Promise<PlannedEdit> {
  let plan: Plan;
  try {
    plan = planEdit(facts, wanted);
  } catch (error) {
    if (!(mayRewrite && error instanceof TableHasNoRoom)) throw error;
    return { facts, plan: await planRewrite(image, facts, error.message, wanted) };
  }
  if (plan.tier !== 'noop') await checkReadsBack(image, plan, wanted.entries);
  return { facts, plan };
}

/**
 * Tier 4: the same wanted dynamic array planned on the file as a rewrite lays it out (a first page of
 * its own for the headers, the old file behind it), where the program header table grows in place.
 * The plan is read back there like any other.
 */
async function planRewrite(image: ElfImage, facts: EditFacts, why: string, wanted: WantedDynamic): Promise<Plan> {
  const shifted = shiftForRewrite(facts, why);
  const source = new PlannedByteSource(new ShiftedByteSource(image.source, shifted.shift), shifted.writes, shifted.size);
  const shiftedImage = await readElfImage(source);
  const { plan } = await planWanted(shiftedImage, await readEditFacts(shiftedImage), wanted, false);
  return { tier: 'rewrite', writes: [...shifted.writes, ...plan.writes], newSize: plan.newSize, shift: shifted.shift };
}

async function checkReadsBack(image: ElfImage, plan: Plan, wanted: readonly WantedEntry[]): Promise<void> {
  let mismatch: string | null;
  try {
    const after = await readEditFacts(await readElfImage(new PlannedByteSource(image.source, plan.writes, plan.newSize)), 'check');
    mismatch = firstMismatch(wanted, currentEntries(after));
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
    if (read?.d_tag !== entry.d_tag || (isStringEntry(entry) && read.text !== entry.text)) return `dynamic entry ${index} does not read back as planned`;
  }
  return null;
}

async function copyTo(from: string, to: string): Promise<void> {
  try {
    await copyFile(from, to);
  } catch (error) {
    throw ioError(to, 'write the output file', error);
  }
}
