// One file of the batch: the hooks as edit operations, through the shared pipeline (edit/plan-file.ts),
// then written (write/commit-plan.ts) unless the run is a dry run. Runs in the batch's thread or in a
// worker thread alike (schedule-files.ts); a failure is the file's outcome, never an exception.

import { type ByteString, DT, EMPTY_BYTE_STRING, ET, PT, splitRunpath } from '../elf/elf.js';
import type { EditOperations } from '../edit/plan-file.js';
import { planWalkedFile, type KnownHead, type SkippedFile, type WalkedFileContext } from './walked-file.js';
import { commitPlan } from '../write/commit-plan.js';
import {
  composeAfterResolver,
  composeRunpath,
  isOneHookRun,
  RESOLVER_HOOK_NAME,
  type ComposedRunpath,
  type Semantics,
} from '../hook-engine/compose-hooks.js';
import type { Hook, TracedEntry } from '../hook-engine/hook.js';
import { asFileError } from '../errors/cuda-patchelf-error.js';
import { writeRefusal } from '../write/write-refusal.js';
import type { FileOutcome, RunpathChange } from './file-outcome.js';
import { isInterrupted, type InterruptFlag } from './interrupt.js';
import type { WalkItem } from '../walk/walk-trees.js';

/** What the auto-patchelf resolver decided for a file, in the main thread: plain data, as sent to worker threads. */
export interface ResolverAnswer {
  /** The runpath it writes, traced (its directories, then the file's `$ORIGIN` entries it keeps); null: it leaves the runpath as it is. */
  readonly runpath: readonly TracedEntry[] | null;
  /** The interpreter --interpreter sets (a byte string), for a file with PT_INTERP; null: none to set. */
  readonly interpreter: ByteString | null;
}

export interface FileItem extends Extract<WalkItem, { kind: 'file' }> {
  /** Absent when the resolver is off, or leaves this file alone (another machine, an incompatible OS ABI). */
  readonly resolver?: ResolverAnswer;
  /** What the resolver's first phase read of the file (absent without it, or when it could not read it). */
  readonly head?: KnownHead;
}

/** What a file is patched with: plain data, as sent to worker threads. */
export interface FileOptions {
  /** Hooks in the order they apply (see orderHooks). */
  readonly hooks: readonly Hook[];
  readonly semantics: Semantics;
  /** Plan only: nothing is written (apply --dry-run, check, plan). */
  readonly dryRun: boolean;
  /**
   * `check`: in nixpkgs-compat, where every run prepends again, a file counts as done when its runpath
   * is already what one run of the hooks makes (isOneHookRun), instead of when a run would change nothing.
   */
  readonly gate?: boolean;
  readonly durable?: boolean;
  /** Write read-only files too; a dry run then does not count them as files apply would refuse. */
  readonly makeWritable?: boolean;
  /** Raised at Ctrl-C (interrupt.ts): a file not started yet, or planned and not yet written, is left alone. */
  readonly interrupt?: InterruptFlag;
}

/** What the hook operations found on a file: its runpath, and the one the hooks make of it (null: no hook applies). */
interface HookAnswer {
  readonly oldRunpath: ByteString | null;
  readonly composed: ComposedRunpath | null;
}

/**
 * The hooks as edit operations: the runpath they compose, set with the semantics' tag policy. With the
 * auto-patchelf resolver, its runpath comes first and the other hooks compose on it (composeAfterResolver).
 */
function hookOperations(item: FileItem, options: FileOptions): EditOperations<HookAnswer> {
  return (editor, image) => {
    const fileFacts = {
      path: item.path,
      relativePath: item.relativePath,
      isSharedObject: image.header.e_type === ET.ET_DYN && !image.programHeaders.some((ph) => ph.p_type === PT.PT_INTERP),
      machine: image.header.e_machine,
    };
    const interpreter = item.resolver?.interpreter ?? null;
    if (interpreter !== null && editor.interpreter() !== interpreter) editor.setInterpreter(interpreter);
    const oldRunpath = editor.runpath();
    const names = item.names ?? 1;
    const resolved = item.resolver?.runpath ?? null;
    const composed =
      resolved === null
        ? composeRunpath(options.hooks, fileFacts, oldRunpath, options.semantics, names)
        : composeAfterResolver(options.hooks, fileFacts, resolved, options.semantics, names);
    if (composed === null) {
      // The resolver alone, leaving the runpath as it is: the file is its, and stays as it is.
      return { oldRunpath, composed: item.resolver === undefined ? null : untouchedRunpath(oldRunpath) };
    }
    if (options.semantics === 'default') {
      if (composed.value !== (oldRunpath ?? '')) editor.setRunpath(composed.value, 'keep');
      return { oldRunpath, composed };
    }
    // Where the resolver replaced the runpath, one run's result does not depend on the runpath before
    // it: the file is done when it has that result. Otherwise every run prepends again (isOneHookRun).
    const done =
      options.gate === true &&
      oldRunpath !== null &&
      editor.runpathTag() === DT.DT_RUNPATH &&
      (resolved === null ? isOneHookRun(options.hooks, fileFacts, oldRunpath, names) : oldRunpath === composed.value);
    // Nixpkgs runs patchelf --set-rpath for every hook, even one that leaves the value as it is (the
    // stubs hook): DT_RPATH becomes DT_RUNPATH, and a file without one gets an empty DT_RUNPATH.
    if (!done) editor.setRunpath(composed.value, 'runpath');
    return { oldRunpath, composed };
  };
}

/** The resolver's answer when it leaves the runpath as it is and no other hook applies. */
function untouchedRunpath(runpath: ByteString | null): ComposedRunpath {
  return {
    value: runpath ?? EMPTY_BYTE_STRING,
    entries: splitRunpath(runpath).map((dir) => ({ dir, hook: null })),
    applied: [RESOLVER_HOOK_NAME],
  };
}

export function skippedOutcome(path: string, skipped: SkippedFile): FileOutcome {
  return { path, status: 'skipped', reason: skipped.reason, ...(skipped.detail === undefined ? {} : { detail: skipped.detail }) };
}

/**
 * `context`: in the thread that walks the batch, its names of each inode and the file when it was
 * sniffed already (schedule-files.ts); a worker thread opens the file again, reading through what the
 * resolver's first phase read of it.
 */
export async function processFile(item: FileItem, options: FileOptions, context?: WalkedFileContext): Promise<FileOutcome> {
  try {
    return await outcomeOf(item, options, context);
  } catch (error) {
    // A bug, in this file alone: reported as such (the original its cause), and the batch goes on.
    return { path: item.path, status: 'failed', error: asFileError(error, item.path) };
  }
}

async function outcomeOf(item: FileItem, options: FileOptions, context: WalkedFileContext | undefined): Promise<FileOutcome> {
  const path = item.path;
  if (isInterrupted(options.interrupt)) {
    context?.opened?.source.close();
    return { path, status: 'interrupted' };
  }
  const seed = item.head?.kind === 'elf' ? { seed: item.head.seed } : {};
  const planned = await planWalkedFile(path, hookOperations(item, options), { ...seed, ...context });
  if (planned.kind === 'failed') return { path, status: 'failed', error: planned.error };
  if (planned.kind === 'skipped') return skippedOutcome(path, planned);
  const { plan, stats, answer } = planned;
  // A file no hook applies to is left as it is, even one an edit cut short: it is not this run's.
  if (answer.composed === null) return { path, status: 'skipped', reason: 'no-hook' };
  if (plan.tier === 'noop') return { path, status: 'unchanged', runpath: answer.oldRunpath };
  const change: RunpathChange = {
    path,
    tier: plan.tier,
    oldRunpath: answer.oldRunpath,
    newRunpath: answer.composed.value,
    entries: answer.composed.entries,
    otherLinks: stats.nlink - 1,
  };
  const refusal = writeRefusal(path, stats, plan.tier, options.makeWritable === true);
  // A dry run writes nothing, so what apply would refuse is no failure of the run: it says so instead.
  if (refusal !== null)
    return options.dryRun ? { ...change, status: 'would-refuse', refusal: refusal.message } : { path, status: 'failed', error: refusal };
  if (options.dryRun) return { ...change, status: 'patched', bytesWritten: 0 };
  // The last moment to stop before a write; once started, the write runs to its end.
  if (isInterrupted(options.interrupt)) return { path, status: 'interrupted' };
  const written = await commitPlan(path, plan, stats, options);
  return written.kind === 'written'
    ? { ...change, status: 'patched', bytesWritten: written.bytes }
    : { path, status: 'failed', error: written.error };
}
