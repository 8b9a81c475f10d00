// What happened to each file of a batch, and the summary counts a run ends with.

import type { ByteString } from '../elf/elf.js';
import type { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { Tier } from '../plan/plan.js';
import type { TracedEntry } from '../hook-engine/hook.js';
import type { FileSkip } from './walked-file.js';

/** Why a batch leaves a file alone: what opening it tells (walked-file.ts), what the walk tells, no hook applying. */
export type OutcomeSkip = FileSkip | 'symlink' | 'special' | 'no-hook' | 'rewrite-temporary';

/** What the hooks change in a file, and how it is (or would be) written. */
export interface RunpathChange {
  readonly path: string;
  readonly tier: Exclude<Tier, 'noop'>;
  readonly oldRunpath: ByteString | null;
  readonly newRunpath: ByteString;
  readonly entries: readonly TracedEntry[];
  /** Other names of the same inode: an in-place edit changes them all. */
  readonly otherLinks: number;
}

export type FileOutcome =
  | { readonly path: string; readonly status: 'skipped'; readonly reason: OutcomeSkip; readonly detail?: string }
  | { readonly path: string; readonly status: 'unchanged'; readonly runpath: ByteString | null }
  | (RunpathChange & { readonly status: 'patched'; readonly bytesWritten: number })
  /**
   * Only in a dry run (plan, check, apply --dry-run): a file to patch that apply would refuse to write
   * as things are (read-only without --make-writable, a rewrite that would split hard links). Nothing
   * is wrong with the file, so the run does not fail; `refusal` is what apply would say.
   */
  | (RunpathChange & { readonly status: 'would-refuse'; readonly refusal: string })
  | { readonly path: string; readonly status: 'failed'; readonly error: CudaPatchelfError }
  /** Not started: the run was interrupted (Ctrl-C) before this file, which was not written. */
  | { readonly path: string; readonly status: 'interrupted' };

export interface BatchSummary {
  visited: number;
  patched: Record<string, number>;
  unchanged: number;
  skipped: Record<string, number>;
  /** Dry runs only: files to patch that apply would refuse to write (not counted in `patched`). */
  wouldRefuse: number;
  failed: number;
  bytesWritten: number;
  patchedWithOtherLinks: number;
}

export function emptySummary(): BatchSummary {
  return { visited: 0, patched: {}, unchanged: 0, skipped: {}, wouldRefuse: 0, failed: 0, bytesWritten: 0, patchedWithOtherLinks: 0 };
}

export function countOutcome(summary: BatchSummary, outcome: FileOutcome): void {
  summary.visited++;
  switch (outcome.status) {
    case 'skipped':
      summary.skipped[outcome.reason] = (summary.skipped[outcome.reason] ?? 0) + 1;
      return;
    case 'unchanged':
      summary.unchanged++;
      return;
    case 'patched':
      summary.patched[outcome.tier] = (summary.patched[outcome.tier] ?? 0) + 1;
      summary.bytesWritten += outcome.bytesWritten;
      if (outcome.otherLinks > 0) summary.patchedWithOtherLinks++;
      return;
    case 'would-refuse':
      summary.wouldRefuse++;
      return;
    case 'failed':
      summary.failed++;
      return;
    case 'interrupted':
      // Files not started are no part of what the run did (patchTrees leaves them out).
      return;
  }
}

export function patchedCount(summary: BatchSummary): number {
  return Object.values(summary.patched).reduce((a, b) => a + b, 0);
}
