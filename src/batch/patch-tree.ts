// The batch: walk the trees, hand each regular file to the scheduler (schedule-files.ts: this thread,
// or worker threads once there is ELF work for them), and count the outcomes. A failing file is
// reported and left untouched; the others go on.

import pLimit from 'p-limit';
import { countOutcome, emptySummary, type BatchSummary, type FileOutcome } from './file-outcome.js';
import type { FileOptions } from './process-file.js';
import { FileScheduler } from './schedule-files.js';
import { walkTrees, type WalkItem } from './walk-trees.js';

export interface BatchOptions extends FileOptions {
  /** Threads patching files at once, at most: 1 patches in this thread, more may start worker threads. */
  readonly jobs: number;
  /** Start the worker threads with the first file and send them every file (schedule-files.ts). */
  readonly threadsFromStart?: boolean;
  /** Called as each file is done (progress, streaming reports). */
  readonly onOutcome?: (outcome: FileOutcome, bytesInFile: number) => void;
}

/**
 * Files handed out ahead per thread: most files of a tree are a sniff and a skip, tens of
 * microseconds, so a thread needs a queue that outlasts a message round trip to stay busy.
 */
const FILES_QUEUED_PER_JOB = 32;

/**
 * The whole walk, each file carrying how many names its inode has in the trees (its own and the
 * hard-link names skipped after it). Only nixpkgs-compat needs this, and it costs the streaming.
 */
async function withNameCounts(walk: AsyncIterable<WalkItem>): Promise<WalkItem[]> {
  const items: WalkItem[] = [];
  const names = new Map<string, number>();
  for await (const item of walk) {
    items.push(item);
    if (item.kind === 'skip' && item.reason === 'hard-link' && item.detail !== undefined) names.set(item.detail, (names.get(item.detail) ?? 1) + 1);
  }
  return items.map((item) => (item.kind === 'file' ? { ...item, names: names.get(item.path) ?? 1 } : item));
}

export interface BatchResult {
  readonly outcomes: FileOutcome[];
  readonly summary: BatchSummary;
  /** Worker threads the run started: none with --jobs 1, or when the trees held no ELF file. */
  readonly workerThreads: number;
}

export async function patchTrees(roots: readonly string[], options: BatchOptions): Promise<BatchResult> {
  const { onOutcome, jobs, threadsFromStart = false, ...fileOptions } = options;
  const limit = pLimit(Math.max(1, jobs) * FILES_QUEUED_PER_JOB);
  const scheduler = new FileScheduler(fileOptions, jobs, threadsFromStart);
  const summary = emptySummary();
  const outcomes: FileOutcome[] = [];
  const pending: Promise<void>[] = [];
  const record = (outcome: FileOutcome, bytes: number): void => {
    outcomes.push(outcome);
    countOutcome(summary, outcome);
    onOutcome?.(outcome, bytes);
  };
  const items = options.semantics === 'nixpkgs-compat' ? await withNameCounts(walkTrees(roots)) : walkTrees(roots);
  for await (const item of items) {
    if (item.kind === 'file') {
      pending.push(limit(async () => record(await scheduler.run(item), item.size)));
    } else if (item.kind === 'skip') {
      record({ path: item.path, status: 'skipped', reason: item.reason, ...(item.detail === undefined ? {} : { detail: item.detail }) }, 0);
    } else {
      record({ path: item.path, status: 'failed', error: item.error }, 0);
    }
  }
  try {
    await Promise.all(pending);
  } finally {
    await scheduler.close();
  }
  // Reports list files in path order, whatever order the workers finished in.
  outcomes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { outcomes, summary, workerThreads: scheduler.workerThreads };
}
