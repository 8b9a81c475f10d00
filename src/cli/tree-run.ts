// One run of `apply`, `check` or `plan`: the command line checked, the batch run, its lines as files finish.

import type { Command } from 'commander';
import { isInterrupted, newInterruptFlag, raiseInterrupt } from '../batch/interrupt.js';
import type { BatchResult } from '../batch/patch-tree.js';
import type { Semantics } from '../hook-engine/compose-hooks.js';
import type { Hook } from '../hook-engine/hook.js';
import { autoPatchelfOptionsOf, type MissingCount, missingCount, resolverLines } from './auto-patchelf-options.js';
import type { CliIo } from './cli-io.js';
import { driverAheadWarning } from './driver-ahead-warning.js';
import { ProgressLine } from './progress-line.js';
import { errorLine, rejectEmptyTrees } from './report.js';
import { checkArguments, hooksFrom, jobsOf, rejectOverlappingTrees, type TreeOptions } from './tree-options.js';
import { verboseLines } from './tree-report.js';

export type TreeCommandName = 'apply' | 'check' | 'plan';

export interface TreeRun extends BatchResult {
  readonly jobs: number;
  readonly hooks: Hook[];
  readonly dryRun: boolean;
  /** Ctrl-C stopped apply: the outcomes are the files done, the others were not touched. */
  readonly interrupted: boolean;
  /**
   * Ends the run's hold on Ctrl-C, once its report is written, and says whether one came when every file
   * was done already (nothing was left undone: the run ends as it would have, with a line that says so).
   */
  readonly release: () => boolean;
  /** Dependencies the resolver found in no directory (not matched by --ignore-missing), and their files: exit 3. */
  readonly missing: MissingCount;
}

export async function runTree(name: TreeCommandName, dirs: string[], options: TreeOptions, command: Command, io: CliIo): Promise<TreeRun> {
  checkArguments(dirs, options, command);
  const jobs = jobsOf(options, io);
  rejectOverlappingTrees(dirs);
  if (name === 'check') rejectEmptyTrees(dirs, 'check');
  const autoPatchelf = await autoPatchelfOptionsOf(options, io.host, dirs);
  const hooks = await hooksFrom(options, autoPatchelf !== null);
  const semantics: Semantics = options.nixpkgsCompat ? 'nixpkgs-compat' : 'default';
  const dryRun = name !== 'apply' || options.dryRun === true;
  const progress = io.stderrIsTty && !options.json && !options.quiet ? new ProgressLine(io) : null;
  const verb = dryRun ? 'would patch' : 'patched';
  // Loaded here, not at start-up: the batch modules (the walk, picomatch, p-limit) cost the
  // single-file commands time they do not need.
  const { patchTrees } = await import('../batch/patch-tree.js');
  // Only a run that writes has anything to stop cleanly; a dry run ends at Ctrl-C as any process does.
  const interrupt = dryRun ? undefined : newInterruptFlag();
  const release = interrupt === undefined ? undefined : io.catchInterrupt?.(() => raiseInterrupt(interrupt));
  const result = await patchTrees(dirs, {
    hooks,
    semantics,
    jobs,
    cpuCount: io.cpuCount,
    threadsFromStart: options.threadsFromStart === true,
    dryRun,
    gate: name === 'check',
    durable: options.durable === true,
    makeWritable: options.makeWritable === true,
    ...(interrupt === undefined ? {} : { interrupt }),
    ...(autoPatchelf === null ? {} : { autoPatchelf }),
    onOutcome: (outcome) => {
      // A file apply would refuse is shown by a dry run of apply even without --verbose, as the failure
      // it would be; plan and check show it in their own listing.
      const shown = options.verbose === true || (name === 'apply' && outcome.status === 'would-refuse' && !options.quiet && !options.json);
      const lines = outcome.status === 'failed' || !shown ? [] : verboseLines(outcome, verb);
      if (outcome.status === 'failed' || lines.length > 0) progress?.clear();
      if (outcome.status === 'failed') io.err(errorLine(outcome.error, outcome.path));
      for (const line of lines) io.out(line);
      progress?.update();
    },
  }).catch((error: unknown) => {
    release?.();
    throw error;
  });
  progress?.clear();
  if (result.resolution !== null) for (const line of resolverLines(result.resolution, options.quiet === true)) io.err(line);
  const warning = options.quiet ? null : driverAheadWarning(name, result.outcomes, hooks, dryRun);
  if (warning !== null) io.err(warning);
  const interrupted = isInterrupted(interrupt) && !result.complete;
  const done = (): boolean => {
    release?.();
    return isInterrupted(interrupt) && !interrupted;
  };
  return { ...result, jobs, hooks, dryRun, interrupted, release: done, missing: missingCount(result.resolution) };
}
