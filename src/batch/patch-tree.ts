// The batch: walk the trees, and for each regular file read → compose hooks → plan → write, with
// bounded concurrency. A failing file is reported and left untouched; the others go on.

import pLimit from 'p-limit';
import { FileByteSource } from '../elf/byte-source.js';
import { DT, ELF_MAGIC, ET, PT } from '../elf/constants.js';
import { readElfImage, skipReason } from '../elf/elf-image.js';
import { planEditOf, type PlannedEdit } from '../edit/edit-file.js';
import { writePlan } from '../write/write-plan.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { composeRunpath, isOneHookRun, type ComposedRunpath, type Semantics } from '../hooks/compose-hooks.js';
import type { Hook } from '../hooks/hook.js';
import { changedWhileRead } from './changed-while-read.js';
import { withFileLock } from '../write/file-lock.js';
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

const ARCHIVE_MAGIC = Buffer.from('!<arch>\n', 'latin1');

function startsWith(bytes: Uint8Array, prefix: Uint8Array): boolean {
  return bytes.length >= prefix.length && prefix.every((byte, i) => bytes[i] === byte);
}

export type FileItem = Extract<WalkItem, { kind: 'file' }>;

/** The per-file options, as sent to worker threads (plain data). */
export type FileOptions = Omit<BatchOptions, 'onOutcome' | 'jobs'>;

/**
 * Files handed out ahead per thread: most files of a tree are a sniff and a skip, tens of
 * microseconds, so a thread needs a queue that outlasts a message round trip to stay busy.
 */
const FILES_QUEUED_PER_JOB = 32;

export async function processFile(item: FileItem, options: FileOptions): Promise<FileOutcome> {
  const path = item.path;
  let source: FileByteSource;
  try {
    source = await FileByteSource.open(path, { followLink: false });
  } catch (error) {
    return { path, status: 'failed', error };
  }
  let composed: ComposedRunpath | null = null;
  let oldRunpath: string | null = null;
  let planned: PlannedEdit;
  try {
    const head = await source.read(0, Math.min(source.size, ARCHIVE_MAGIC.length), 'file magic');
    if (startsWith(head, ARCHIVE_MAGIC)) return { path, status: 'skipped', reason: 'archive' };
    if (!startsWith(head, ELF_MAGIC)) return { path, status: 'skipped', reason: 'not-elf' };
    const image = await readElfImage(source);
    const reason = skipReason(image);
    if (reason !== null) return { path, status: 'skipped', reason };
    const fileFacts = {
      path,
      relativePath: item.relativePath,
      isSharedObject: image.header.e_type === ET.ET_DYN && !image.programHeaders.some((ph) => ph.p_type === PT.PT_INTERP),
      machine: image.header.e_machine,
    };
    planned = await planEditOf(image, (editor) => {
      oldRunpath = editor.runpath();
      composed = composeRunpath(options.hooks, fileFacts, oldRunpath, options.semantics, item.names ?? 1);
      if (composed === null) return;
      if (options.semantics === 'default') {
        if (composed.value !== (oldRunpath ?? '')) editor.setRunpath(composed.value, 'keep');
        return;
      }
      const done = options.gate === true && oldRunpath !== null && editor.runpathTag() === DT.DT_RUNPATH && isOneHookRun(options.hooks, fileFacts, oldRunpath);
      // Nixpkgs runs patchelf --set-rpath for every hook, even one that leaves the value as it is (the
      // stubs hook): DT_RPATH becomes DT_RUNPATH, and a file without one gets an empty DT_RUNPATH.
      if (!done) editor.setRunpath(composed.value, 'runpath');
    });
  } catch (error) {
    // Any read failure of a file that another process changed since the walk listed it is that change.
    const changed = await changedWhileRead(path, item.size, source.stats, error);
    return { path, status: 'failed', error: changed ?? (error instanceof CudaPatchelfError ? error.withFile(path) : error) };
  } finally {
    await source.close();
  }
  // Assigned inside the operations callback, which TypeScript cannot follow.
  const result = composed as ComposedRunpath | null;
  if (result === null) return { path, status: 'skipped', reason: 'no-hook' };
  if (planned.plan.tier === 'noop') return { path, status: 'unchanged', runpath: oldRunpath };
  const refusal = writeRefusal(path, source.stats, planned.plan.tier, options.makeWritable === true);
  if (refusal !== null) return { path, status: 'failed', error: refusal };
  let bytesWritten = 0;
  if (!options.dryRun) {
    try {
      // Under the lock, writePlan's check sees any write another run made since this one read the file.
      bytesWritten = await withFileLock(path, source.stats, () => writePlan(path, planned.plan, source.stats, options));
    } catch (error) {
      return { path, status: 'failed', error };
    }
  }
  return {
    path,
    status: 'patched',
    tier: planned.plan.tier,
    oldRunpath,
    newRunpath: result.value,
    entries: result.entries,
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
