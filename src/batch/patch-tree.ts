// The batch: walk the trees, hand each regular file to the scheduler (schedule-files.ts: this thread,
// or worker threads once there is ELF work for them), and count the outcomes. A failing file is
// reported and left untouched; the others go on.

import { lstatSync } from 'node:fs';
import { ElfFile } from '../elf/elf.js';
import { countOutcome, emptySummary, type BatchSummary, type FileOutcome } from './file-outcome.js';
import { InterruptPoll } from './interrupt.js';
import type { FileOptions } from './process-file.js';
import { FileScheduler } from './schedule-files.js';
import { walkTrees, type WalkItem } from '../walk/walk-trees.js';
import { resolveTrees, type AutoPatchelfOptions, type TreeResolution } from './resolve-trees.js';

export interface BatchOptions extends FileOptions {
  /** Threads patching files at once, at most (--jobs): 1 patches in this thread, more may start worker threads. */
  readonly jobs: number;
  /** The CPUs this process may run on: never more threads than these (schedule-files.ts). */
  readonly cpuCount: number;
  /** Start the worker threads with the batch and send them every ELF file (schedule-files.ts). */
  readonly threadsFromStart?: boolean;
  /** Called as each file is done (progress, streaming reports). */
  readonly onOutcome?: (outcome: FileOutcome) => void;
  /** --auto-patchelf: the resolver's phase 1 (resolve-trees.ts) runs over the whole walk first. */
  readonly autoPatchelf?: AutoPatchelfOptions;
}

/**
 * The whole walk, each file carrying how many names its inode has in the trees. Only nixpkgs-compat
 * needs this (Nixpkgs patches an inode once per name it finds), and it costs the streaming and a stat
 * of every file, which the walk does not take.
 */
function withNameCounts<T extends WalkItem>(walk: Iterable<T>): T[] {
  const items = [...walk];
  // A file that cannot be stat'ed counts one name; opening it reports what is wrong.
  const inodeOf = (path: string): string | null => {
    try {
      const stats = lstatSync(path);
      return `${stats.dev}:${stats.ino}`;
    } catch {
      return null;
    }
  };
  const inodes = items.map((item) => (item.kind === 'file' ? inodeOf(item.path) : null));
  const names = new Map<string, number>();
  for (const inode of inodes) if (inode !== null) names.set(inode, (names.get(inode) ?? 0) + 1);
  return items.map((item, index) => {
    const inode = inodes[index] ?? null;
    return item.kind === 'file' && inode !== null ? { ...item, names: names.get(inode) ?? 1 } : item;
  });
}

export interface BatchResult {
  readonly outcomes: FileOutcome[];
  readonly summary: BatchSummary;
  /** The most threads that could patch at once: jobs, never more than the CPUs (1: this thread alone). */
  readonly threadLimit: number;
  /**
   * Worker threads the run started: none with a limit of 1, or when the trees held no ELF file; never
   * more than the limit, nor than the ELF files handed to them (a replacement for a dead one aside).
   */
  readonly workerThreads: number;
  /** With --auto-patchelf: what the resolver found, per file and for the run. */
  readonly resolution: Omit<TreeResolution, 'items'> | null;
  /** Every file the walk listed was done: no Ctrl-C left one out (one that came after the last file changes nothing). */
  readonly complete: boolean;
}

/**
 * A file named on the command line that is not an ELF file is bad input (the file the user named cannot
 * be patched), where in a tree it is one of the files a tree holds: a failure that says what it is.
 */
async function namedOutcome(outcome: FileOutcome): Promise<FileOutcome> {
  if (outcome.status !== 'skipped' || (outcome.reason !== 'not-elf' && outcome.reason !== 'archive')) return outcome;
  const opened = await ElfFile.open(outcome.path);
  if (opened.kind === 'elf') {
    // It became an ELF file since: it is left for the next run, as a file that changed is.
    opened.file.close();
    return outcome;
  }
  return { path: outcome.path, status: 'failed', error: opened.error };
}

export async function patchTrees(roots: readonly string[], options: BatchOptions): Promise<BatchResult> {
  const { onOutcome, jobs, cpuCount, threadsFromStart = false, autoPatchelf, ...fileOptions } = options;
  const scheduler = new FileScheduler(fileOptions, jobs, cpuCount, threadsFromStart);
  const summary = emptySummary();
  const outcomes: FileOutcome[] = [];
  const pending: Promise<void>[] = [];
  let complete = true;
  const record = (outcome: FileOutcome): void => {
    if (outcome.status === 'interrupted') {
      complete = false;
      return;
    }
    outcomes.push(outcome);
    countOutcome(summary, outcome);
    onOutcome?.(outcome);
  };
  // A walk of files done here, synchronously, would not let a Ctrl-C be heard for seconds.
  const poll = new InterruptPoll(options.interrupt);
  // With the resolver, every file of the trees is resolved before the first one is planned.
  const resolution =
    autoPatchelf === undefined ? null : await resolveTrees(roots, walkTrees(roots), autoPatchelf, options.semantics, options.hooks, poll);
  const walk = resolution?.items ?? walkTrees(roots);
  const items = options.semantics === 'nixpkgs-compat' ? withNameCounts(walk) : walk;
  try {
    for (const item of items) {
      if (await poll.interrupted()) {
        complete = false;
        break;
      }
      if (item.kind === 'file') {
        const taken = await scheduler.take(item);
        const outcome = 'later' in taken ? taken.later : Promise.resolve(taken.outcome);
        pending.push((item.named === undefined ? outcome : outcome.then(namedOutcome)).then(record));
      } else if (item.kind === 'skip') {
        record({ path: item.path, status: 'skipped', reason: item.reason });
      } else {
        record({ path: item.path, status: 'failed', error: item.error });
      }
    }
    await scheduler.finish();
    await Promise.all(pending);
  } finally {
    await scheduler.close();
  }
  // Reports list files in path order, whatever order the workers finished in.
  outcomes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const resolverFindings =
    resolution === null
      ? null
      : { reports: resolution.reports, skipped: resolution.skipped, warnings: resolution.warnings, libc: resolution.libc };
  return {
    outcomes,
    summary,
    threadLimit: scheduler.maxThreads,
    workerThreads: scheduler.workerThreads,
    resolution: resolverFindings,
    complete,
  };
}
