// The batch: walk the trees, hand each regular file to the scheduler (schedule-files.ts: this thread,
// or worker threads once there is ELF work for them), and count the outcomes. A failing file is
// reported and left untouched; the others go on.

import { lstatSync } from 'node:fs';
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
  readonly onOutcome?: (outcome: FileOutcome) => void;
}

/**
 * Files handed out ahead per thread: most files of a tree are a sniff and a skip, tens of
 * microseconds, so a thread needs a queue that outlasts a message round trip to stay busy.
 */
const FILES_QUEUED_PER_JOB = 32;

/**
 * The whole walk, each file carrying how many names its inode has in the trees. Only nixpkgs-compat
 * needs this (Nixpkgs patches an inode once per name it finds), and it costs the streaming and a stat
 * of every file, which the walk does not take.
 */
async function withNameCounts(walk: AsyncIterable<WalkItem>): Promise<WalkItem[]> {
  const items: WalkItem[] = [];
  for await (const item of walk) items.push(item);
  const inodeOf = new Map<string, string>();
  const names = new Map<string, number>();
  for (const item of items) {
    if (item.kind !== 'file') continue;
    const stats = lstatSync(item.path, { throwIfNoEntry: false });
    if (stats === undefined) continue;
    const inode = `${stats.dev}:${stats.ino}`;
    inodeOf.set(item.path, inode);
    names.set(inode, (names.get(inode) ?? 0) + 1);
  }
  return items.map((item) => {
    const inode = item.kind === 'file' ? inodeOf.get(item.path) : undefined;
    return item.kind === 'file' ? { ...item, names: (inode === undefined ? undefined : names.get(inode)) ?? 1 } : item;
  });
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
  const record = (outcome: FileOutcome): void => {
    outcomes.push(outcome);
    countOutcome(summary, outcome);
    onOutcome?.(outcome);
  };
  const items = options.semantics === 'nixpkgs-compat' ? await withNameCounts(walkTrees(roots)) : walkTrees(roots);
  for await (const item of items) {
    if (item.kind === 'file') {
      pending.push(limit(async () => record(await scheduler.run(item))));
    } else if (item.kind === 'skip') {
      record({ path: item.path, status: 'skipped', reason: item.reason });
    } else {
      record({ path: item.path, status: 'failed', error: item.error });
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
