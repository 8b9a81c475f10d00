// How the batch opens a file the walk listed, before the per-file pipeline (edit/plan-file.ts) plans
// it: its first bytes tell an archive or a file that is not ELF (no stat taken); an ELF file is stat'ed,
// and a later name of a hard-linked one is told apart (first-names.ts); a path that is a symbolic link
// now is refused (O_NOFOLLOW). What an earlier opening read of the file (the resolver's first phase)
// travels with it: its kind, and for an ELF file the blocks read, which are read through while the
// file is the same. Each ELF file is opened read-only once here (and once more to be written).

import { ElfFile, type FileByteSource, FileHead, fileKind, KIND_BYTES, type ReadSeed } from '../elf/elf.js';
import { changedWhileRead } from './changed-while-read.js';
import { planElfFile, type EditOperations, type FilePlan } from '../edit/plan-file.js';
import { skipReason, type SkipReason } from '../edit/skip-reason.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { FirstNames } from './first-names.js';

/** Why the batch leaves a walked file alone: what the pipeline skips, and what the opening tells. */
export type FileSkip = SkipReason | 'archive' | 'not-elf' | 'hard-link';

export interface SkippedFile {
  readonly kind: 'skipped';
  readonly reason: FileSkip;
  /** For a hard link: the name of the same inode that is patched instead. */
  readonly detail?: string;
}

/** A walked file that its first block shows is ELF, open and stat'ed, for planWalkedFile or closed by whoever got it. */
export interface SniffedElf {
  readonly kind: 'elf';
  readonly source: FileByteSource;
}

/** A walked file that could not be opened or read: the error names it. */
export interface FailedFile {
  readonly kind: 'failed';
  readonly error: CudaPatchelfError;
}

/**
 * What an earlier opening of a walked file found (the auto-patchelf resolver's first phase reads every
 * file of the trees): its kind, and for an ELF file what it read. Plain data, as sent to worker threads.
 */
export type KnownHead = { readonly kind: 'not-elf' | 'archive' } | { readonly kind: 'elf'; readonly seed: ReadSeed };

/**
 * How planWalkedFile reaches a file: the batch's names of each inode, and the file when sniffed already
 * (open), or what an earlier opening read of it (`seed`, when that told an ELF file).
 */
export interface WalkedFileContext {
  readonly inodes?: FirstNames;
  /** The file open, sniffed by sniffWalkedFile (planWalkedFile closes it). */
  readonly opened?: SniffedElf;
  readonly seed?: ReadSeed;
}

/**
 * sniffWalkedFile for a file whose head is known, without opening it: an archive, a file that is not ELF
 * or a later name of a hard-linked one (by the inode the earlier opening saw) comes back skipped; null
 * for an ELF file to plan (planWalkedFile, with the seed).
 */
export function recallWalkedFile(path: string, head: KnownHead, inodes?: FirstNames): SkippedFile | null {
  if (head.kind !== 'elf') return { kind: 'skipped', reason: head.kind };
  const first = inodes?.recordName(path, head.seed.identity) ?? null;
  return first === null ? null : { kind: 'skipped', reason: 'hard-link', detail: first };
}

/**
 * Archives and files that are not ELF, told by their first bytes alone (no stat), and the later names
 * of a hard-linked ELF file (after the stat); an ELF file this batch patches under this name comes
 * back open. The head is closed unless it comes back open.
 */
function sniffHead(head: FileHead, inodes: FirstNames | undefined): SkippedFile | SniffedElf {
  let source: FileByteSource | null = null;
  try {
    const kind = fileKind(head.firstBytes(KIND_BYTES));
    if (kind !== 'elf') return { kind: 'skipped', reason: kind === 'archive' ? 'archive' : 'not-elf' };
    source = head.statNow();
  } finally {
    if (source === null) head.close();
  }
  const first = inodes?.recordName(source.path, source.stats) ?? null;
  if (first === null) return { kind: 'elf', source };
  source.close();
  return { kind: 'skipped', reason: 'hard-link', detail: first };
}

/**
 * The first step of planWalkedFile alone, synchronous: an archive, a file that is not ELF or a later
 * name of a hard-linked one comes back skipped (and closed); an ELF file comes back open; a file that
 * cannot be opened or read, as the error naming it.
 */
export function sniffWalkedFile(path: string, inodes?: FirstNames): SkippedFile | SniffedElf | FailedFile {
  try {
    return sniffHead(FileHead.openWalked(path), inodes);
  } catch (error) {
    if (!(error instanceof CudaPatchelfError)) throw error;
    return { kind: 'failed', error: error.withFile(path) };
  }
}

/**
 * The walked file open and stat'ed, reading through `seed` when it is still the file the seed was read
 * from; null (closed) when it is not: it is then sniffed again like any other.
 */
function openSeeded(path: string, seed: ReadSeed): SniffedElf | null {
  const head = FileHead.openWalked(path);
  let source: FileByteSource | null = null;
  try {
    source = head.statNow();
  } finally {
    if (source === null) head.close();
  }
  if (source.adoptSeed(seed)) return { kind: 'elf', source };
  source.close();
  return null;
}

/** The opening of a walked file, however it comes: sniffed already, read through a seed, or opened here. */
function openWalked(path: string, context: WalkedFileContext): SkippedFile | SniffedElf | FailedFile {
  if (context.opened !== undefined) return context.opened;
  try {
    const seeded = context.seed === undefined ? null : openSeeded(path, context.seed);
    return seeded ?? sniffHead(FileHead.openWalked(path), context.inodes);
  } catch (error) {
    if (!(error instanceof CudaPatchelfError)) throw error;
    return { kind: 'failed', error: error.withFile(path) };
  }
}

/**
 * A file a tree walk listed as a regular file, through the per-file pipeline: what the opening tells
 * (skipped, or the error), the files `apply` leaves alone (skipReason), or the pipeline's plan. A file
 * that changed while it was read fails as that change. Nothing is written; only a bug is thrown.
 */
export async function planWalkedFile<T>(
  path: string,
  operations: EditOperations<T>,
  context: WalkedFileContext = {},
): Promise<FilePlan<T> | SkippedFile> {
  const opened = openWalked(path, context);
  if (opened.kind !== 'elf') return opened;
  const { source } = opened;
  try {
    let planned: FilePlan<T> | SkippedFile;
    try {
      const file = await ElfFile.read(source);
      const reason = skipReason(file.image);
      planned = reason === null ? await planElfFile(file, operations) : { kind: 'skipped', reason };
    } catch (error) {
      if (!(error instanceof CudaPatchelfError)) throw error;
      planned = { kind: 'failed', error: error.withFile(path) };
    }
    if (planned.kind !== 'failed') return planned;
    return { kind: 'failed', error: (await changedWhileRead(path, source.stats, planned.error)) ?? planned.error };
  } finally {
    source.close();
  }
}
