// The one per-file pipeline every command shares up to the write: open → sniff → read the image →
// read the planner's facts → run the caller's operations once → decide the tier and plan → read the
// plan back. Writing the plan is write/'s (commitPlan); `apply` and the single-file commands differ
// only in the options they pass and in what they make of the result.

import type { Stats } from 'node:fs';
import { FileHead, type ByteSource, type FileByteSource, type ReadSeed } from '../elf/byte-source.js';
import { ElfFile, withElfFile } from '../elf/elf-file.js';
import { readElfImage, type ElfImage } from '../elf/elf-image.js';
import { fileKind, KIND_BYTES, type FileKind } from '../elf/file-kind.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { DynamicEditor } from '../plan/dynamic-editor.js';
import { currentEntries, type CurrentEntry, type EditFacts, type LaterFact } from '../plan/edit-facts.js';
import { planEdit } from '../plan/plan-edit.js';
import type { NeedsRewrite, Plan, Planned } from '../plan/plan.js';
import { PlannedByteSource } from '../plan/planned-byte-source.js';
import { shiftForRewrite } from '../plan/shift-for-rewrite.js';
import { ShiftedByteSource } from '../plan/shifted-byte-source.js';
import { isStringEntry, type WantedDynamic, type WantedEntry } from '../plan/wanted.js';
import { changedWhileRead } from './changed-while-read.js';
import { readEditFacts, readLaterFact } from './read-edit-facts.js';
import { skipReason, type SkipReason } from './skip-reason.js';

/**
 * The operations to carry out on a file's dynamic array, run once per file; they may read the image
 * (e_machine, say), and what they return comes back with the plan.
 */
export type EditOperations<T = void> = (editor: DynamicEditor, image: ElfImage) => T | Promise<T>;

export type FileSkip = SkipReason | 'archive' | 'not-elf' | 'hard-link';

export interface PlannedFile<T> extends PlannedEdit<T> {
  readonly kind: 'planned';
  /** The file as it was opened: the write checks it is still that file. */
  readonly stats: Stats;
}

export interface SkippedFile {
  readonly kind: 'skipped';
  readonly reason: FileSkip;
  /** For a hard link: the name of the same inode that is patched instead. */
  readonly detail?: string;
}

/**
 * Which name of an inode a batch patches (the batch keeps the names it has seen): a hard-linked file
 * is patched once, through the first of its names that shows it is an ELF file.
 */
export interface InodeNames {
  /**
   * Records `path` as a name of the inode `stats` describes, and returns the name the inode was first
   * recorded under, or null when that is `path` itself (the name to patch it through).
   */
  recordName(path: string, stats: Pick<Stats, 'dev' | 'ino'>): string | null;
}

/**
 * A file named on the command line: a symbolic link is followed, as patchelf does, and a file that
 * cannot be edited (not ELF, static, debug-info…) fails. Nothing is written. Errors name the file.
 */
export function planCommandLineFile<T>(path: string, operations: EditOperations<T>): Promise<PlannedFile<T>> {
  return withElfFile(path, (file) => planOpenFile(file, operations));
}

/**
 * How planWalkedFile reaches a file: the batch's names of each inode, and the file when sniffed already
 * (open), or what an earlier opening read of it (`seed`, when that told an ELF file).
 */
export interface WalkedFileContext {
  readonly inodes?: InodeNames;
  /** The file open, sniffed by sniffWalkedFile (planWalkedFile closes it). */
  readonly opened?: SniffedElf;
  readonly seed?: ReadSeed;
}

/**
 * What an earlier opening of a walked file found (the auto-patchelf resolver's first phase reads every
 * file of the trees): its kind, and for an ELF file what it read. Plain data, as sent to worker threads.
 */
export type KnownHead = { readonly kind: 'not-elf' | 'archive' } | { readonly kind: 'elf'; readonly seed: ReadSeed };

/**
 * sniffWalkedFile for a file whose head is known, without opening it: an archive, a file that is not ELF
 * or a later name of a hard-linked one (by the inode the earlier opening saw) comes back skipped; null
 * for an ELF file to plan (planWalkedFile, with the seed).
 */
export function recallWalkedFile(path: string, head: KnownHead, inodes?: InodeNames): SkippedFile | null {
  if (head.kind !== 'elf') return { kind: 'skipped', reason: head.kind };
  const first = inodes?.recordName(path, head.seed.identity) ?? null;
  return first === null ? null : { kind: 'skipped', reason: 'hard-link', detail: first };
}

/**
 * A file a tree walk listed as a regular file: a path that is a symbolic link now is refused
 * (O_NOFOLLOW); archives, non-ELF files, hard links to a file patched under another name (`inodes`)
 * and the files `apply` leaves alone (skipReason) come back skipped; a read failure of a file that
 * changed after it was opened is reported as that change. Nothing is written.
 */
export async function planWalkedFile<T>(
  path: string,
  operations: EditOperations<T>,
  context: WalkedFileContext = {},
): Promise<PlannedFile<T> | SkippedFile> {
  const seeded = context.opened ?? (context.seed === undefined ? null : openSeeded(path, context.seed));
  const sniffed = seeded ?? sniffHead(FileHead.openWalked(path), context.inodes);
  if (sniffed.kind === 'skipped') return sniffed;
  const { source } = sniffed;
  try {
    const file = await ElfFile.read(source);
    const reason = skipReason(file.image);
    if (reason !== null) return { kind: 'skipped', reason };
    return await planOpenFile(file, operations);
  } catch (error) {
    const changed = await changedWhileRead(path, source.stats, error);
    throw changed ?? (error instanceof CudaPatchelfError ? error.withFile(path) : error);
  } finally {
    source.close();
  }
}

/**
 * Archives and files that are not ELF, told by their first bytes alone (no stat), and the later names
 * of a hard-linked ELF file (after the stat); an ELF file this batch patches under this name comes
 * back open. The head is closed unless it comes back open; errors name the file.
 */
function sniffHead(head: FileHead, inodes: InodeNames | undefined): SkippedFile | SniffedElf {
  let kind: FileKind;
  let source: FileByteSource | null = null;
  try {
    kind = fileKind(head.firstBytes(KIND_BYTES));
    if (kind === 'elf') source = head.statNow();
  } catch (error) {
    head.close();
    throw error;
  }
  if (source === null) {
    head.close();
    return { kind: 'skipped', reason: kind === 'archive' ? 'archive' : 'not-elf' };
  }
  let first: string | null;
  try {
    first = inodes?.recordName(source.path, source.stats) ?? null;
  } catch (error) {
    source.close();
    throw error;
  }
  if (first === null) return { kind: 'elf', source };
  source.close();
  return { kind: 'skipped', reason: 'hard-link', detail: first };
}

/**
 * The walked file open and stat'ed, reading through `seed` when it is still the file the seed was read
 * from; null (closed) when it is not: it is then sniffed again like any other.
 */
function openSeeded(path: string, seed: ReadSeed): SniffedElf | null {
  const head = FileHead.openWalked(path);
  let source: FileByteSource;
  try {
    source = head.statNow();
  } catch (error) {
    head.close();
    throw error;
  }
  if (source.adoptSeed(seed)) return { kind: 'elf', source };
  source.close();
  return null;
}

/** A walked file that its first block shows is ELF, open and stat'ed, for planWalkedFile or closed by whoever got it. */
export interface SniffedElf {
  readonly kind: 'elf';
  readonly source: FileByteSource;
}

/**
 * The first step of planWalkedFile alone, synchronous: an archive, a file that is not ELF or a later
 * name of a hard-linked one comes back skipped (and closed); an ELF file comes back open; null for a
 * file that cannot be opened or read (planWalkedFile then says what is wrong with it).
 */
export function sniffWalkedFile(path: string, inodes?: InodeNames): SkippedFile | SniffedElf | null {
  try {
    return sniffHead(FileHead.openWalked(path), inodes);
  } catch {
    return null;
  }
}

async function planOpenFile<T>(file: ElfFile, operations: EditOperations<T>): Promise<PlannedFile<T>> {
  return { kind: 'planned', stats: file.stats, ...(await planEditOf(file.image, operations)) };
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
