// The batch: walk the trees, and for each regular file plan the hooks' runpath through the shared
// pipeline (edit/plan-file.ts) and write it (write/write-plan.ts), with bounded concurrency. A
// failing file is reported and left untouched; the others go on.

import pLimit from 'p-limit';
import { DT, ET, PT } from '../elf/constants.js';
import { planListedFile, type EditOperations, type PlannedFile, type SkippedFile } from '../edit/plan-file.js';
import { commitPlan } from '../write/write-plan.js';
import { composeRunpath, isOneHookRun, type ComposedRunpath, type Semantics } from '../hooks/compose-hooks.js';
import type { Hook } from '../hooks/hook.js';
import { writeRefusal } from '../write/write-refusal.js';
import { countOutcome, emptySummary, type BatchSummary, type FileOutcome } from './file-outcome.js';
import { walkTrees, type WalkItem } from './walk-trees.js';
import { WorkerPool, workersAvailable } from './worker-pool.js';

export interface BatchOptions {
  /** Hooks in the order they apply (see orderHooks). */
  readonly hooks: readonly Hook[];
  readonly semantics: Semantics;
  /** Threads patching files at once: 1 patches in this thread, more start that many worker threads. */
  readonly jobs: number;
  /** Plan only: nothing is written (apply --dry-run, check, plan). */
  readonly dryRun: boolean;
  /**
   * `check`: in nixpkgs-compat, where every run prepends again, a file counts as done when its runpath
   * is already what one run of the hooks makes (isOneHookRun), instead of when a run would change nothing.
   */
  readonly gate?: boolean;
  readonly durable?: boolean;
  readonly makeWritable?: boolean;
  /** Called as each file is done (progress, streaming reports). */
  readonly onOutcome?: (outcome: FileOutcome, bytesInFile: number) => void;
}

export type FileItem = Extract<WalkItem, { kind: 'file' }>;

/** The per-file options, as sent to worker threads (plain data). */
export type FileOptions = Omit<BatchOptions, 'onOutcome' | 'jobs'>;

/**
 * Files handed out ahead per thread: most files of a tree are a sniff and a skip, tens of
 * microseconds, so a thread needs a queue that outlasts a message round trip to stay busy.
 */
const FILES_QUEUED_PER_JOB = 32;

/** What the hook operations found on a file: its runpath, and the one the hooks make of it (null: no hook applies). */
interface HookAnswer {
  readonly oldRunpath: string | null;
  readonly composed: ComposedRunpath | null;
}

/** The hooks as edit operations: the runpath they compose, set with the semantics' tag policy. */
function hookOperations(item: FileItem, options: FileOptions): EditOperations<HookAnswer> {
  return (editor, image) => {
    const fileFacts = {
      path: item.path,
      relativePath: item.relativePath,
      isSharedObject: image.header.e_type === ET.ET_DYN && !image.programHeaders.some((ph) => ph.p_type === PT.PT_INTERP),
      machine: image.header.e_machine,
    };
    const oldRunpath = editor.runpath();
    const composed = composeRunpath(options.hooks, fileFacts, oldRunpath, options.semantics, item.names ?? 1);
    if (composed === null) return { oldRunpath, composed };
    if (options.semantics === 'default') {
      if (composed.value !== (oldRunpath ?? '')) editor.setRunpath(composed.value, 'keep');
      return { oldRunpath, composed };
    }
    const done = options.gate === true && oldRunpath !== null && editor.runpathTag() === DT.DT_RUNPATH && isOneHookRun(options.hooks, fileFacts, oldRunpath);
    // Nixpkgs runs patchelf --set-rpath for every hook, even one that leaves the value as it is (the
    // stubs hook): DT_RPATH becomes DT_RUNPATH, and a file without one gets an empty DT_RUNPATH.
    if (!done) editor.setRunpath(composed.value, 'runpath');
    return { oldRunpath, composed };
  };
}

export async function processFile(item: FileItem, options: FileOptions): Promise<FileOutcome> {
  const path = item.path;
  let planned: PlannedFile<HookAnswer> | SkippedFile;
  try {
    planned = await planListedFile(item, hookOperations(item, options));
  } catch (error) {
    return { path, status: 'failed', error };
  }
  if (planned.kind === 'skipped') return { path, status: 'skipped', reason: planned.reason };
  const { plan, stats, answer } = planned;
  // A file no hook applies to is left as it is, even one an edit cut short: it is not this run's.
  if (answer.composed === null) return { path, status: 'skipped', reason: 'no-hook' };
  if (plan.tier === 'noop') return { path, status: 'unchanged', runpath: answer.oldRunpath };
  const refusal = writeRefusal(path, stats, plan.tier, options.makeWritable === true);
  if (refusal !== null) return { path, status: 'failed', error: refusal };
  let bytesWritten = 0;
  if (!options.dryRun) {
    try {
      bytesWritten = await commitPlan(path, plan, stats, options);
    } catch (error) {
      return { path, status: 'failed', error };
    }
  }
  return {
    path,
    status: 'patched',
    tier: plan.tier,
    oldRunpath: answer.oldRunpath,
    newRunpath: answer.composed.value,
    entries: answer.composed.entries,
    bytesWritten,
    otherLinks: item.nlink - 1,
  };
}

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
}

export async function patchTrees(roots: readonly string[], options: BatchOptions): Promise<BatchResult> {
  const { onOutcome, jobs, ...fileOptions } = options;
  const limit = pLimit(Math.max(1, jobs) * FILES_QUEUED_PER_JOB);
  const pool = jobs > 1 && workersAvailable() ? new WorkerPool(jobs, fileOptions) : null;
  const patchOne = (item: FileItem): Promise<FileOutcome> => (pool === null ? processFile(item, fileOptions) : pool.run(item));
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
      pending.push(limit(async () => record(await patchOne(item), item.size)));
    } else if (item.kind === 'skip') {
      record({ path: item.path, status: 'skipped', reason: item.reason, ...(item.detail === undefined ? {} : { detail: item.detail }) }, 0);
    } else {
      record({ path: item.path, status: 'failed', error: item.error }, 0);
    }
  }
  try {
    await Promise.all(pending);
  } finally {
    await pool?.close();
  }
  // Reports list files in path order, whatever order the workers finished in.
  outcomes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { outcomes, summary };
}
