// `apply`, `check` and `plan`: the hooks over whole output trees.

import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { byteStringToText, textToByteString } from '../elf/byte-string.js';
import type { BatchResult } from '../batch/patch-tree.js';
import { patchedCount, type BatchSummary, type FileOutcome } from '../batch/file-outcome.js';
import { isInterrupted, newInterruptFlag, raiseInterrupt } from '../batch/interrupt.js';
import { CudaPatchelfError, oneLine } from '../errors/cuda-patchelf-error.js';
import {
  BUILTIN_HOOK_NAMES,
  CUDA_COMPAT_PATTERNS,
  cudaCompatHook,
  DEFAULT_DRIVER_LINK,
  driverHook,
  dropCudaCompatHook,
  removeStubsHook,
} from '../hook-engine/builtin-hooks.js';
import { RESOLVER_HOOK_NAME, type Semantics } from '../hook-engine/compose-hooks.js';
import { parseHookConfig } from '../hook-engine/hook-config.js';
import type { Hook, TracedEntry } from '../hook-engine/hook.js';
import type { ResolverReport } from '../batch/resolve-trees.js';
import { orderHooks } from '../hook-engine/order-hooks.js';
import { hookDirectory } from '../hook-engine/runpath-entry.js';
import { NIXPKGS_STUBS_PATTERNS, stubsMatcher } from '../hook-engine/stubs-pattern.js';
import type { CliIo } from './cli-io.js';
import { driverAheadWarning } from './driver-ahead-warning.js';
import { EXIT } from './exit-codes.js';
import { counted, errorJson, errorLine, existingTrees, rejectEmptyPaths, rejectEmptyTrees } from './report.js';
import { ProgressLine } from './progress-line.js';
import { docPath } from './package-files.js';
import {
  autoPatchelfOptionsOf,
  libcText,
  missingCount,
  missingText,
  type MissingCount,
  namesResolvedBy,
  resolverJson,
  resolverLines,
  withAutoPatchelfOptions,
  type AutoPatchelfFlags,
} from './auto-patchelf-options.js';

interface TreeOptions extends AutoPatchelfFlags {
  driver: boolean;
  driverLink: string;
  cudaCompat?: string;
  dropCudaCompat?: boolean;
  removeStubs?: boolean;
  stubsPattern?: string[];
  config?: string;
  nixpkgsCompat?: boolean;
  jobs?: string;
  threadsFromStart?: boolean;
  json?: boolean;
  quiet?: boolean;
  verbose?: boolean;
  dryRun?: boolean;
  durable?: boolean;
  makeWritable?: boolean;
}

/**
 * Patching threads by default: half the CPUs. A thread patching files keeps about 1.5 cores busy (V8
 * compiles and collects garbage beside it on threads of its own, and each worker compiles the code
 * anew), so one thread per CPU oversubscribes them: measured on 2 CPUs, --jobs 1 beats --jobs 2; on 16,
 * --jobs 8 beats --jobs 16 (docs/benchmarks.md, Threads).
 */
function defaultJobs(cpuCount: number): number {
  return Math.max(1, Math.floor(cpuCount / 2));
}

/**
 * The largest --jobs taken. A value above the CPUs is capped at them (a Nix builder passes
 * NIX_BUILD_CORES, which may be more than this process may use), but none can be above 8192: that is
 * the most CPUs Linux is built for (x86_64's NR_CPUS_RANGE_END; arm64 stops at 4096). A larger number
 * is not a CPU count but a mistake, such as a number meant for another option.
 */
const MAX_JOBS = 8192;

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

function withTreeOptions(command: Command, cpuCount: number): Command {
  return withAutoPatchelfOptions(command.argument('<dirs...>', 'output trees (or single files) to walk'))
    .option('--no-driver', 'leave out the driver hook (Nixpkgs: dontUseAutoAddDriverRunpath)')
    .option('--driver-link <dir>', 'the driver link, absolute; the hook adds DIR/lib (DIR-32/lib for i386 files)', DEFAULT_DRIVER_LINK)
    .option('--cuda-compat <dir>', 'add the cuda_compat hook (absolute DIR): DIR/compat goes before the driver directory')
    .option(
      '--drop-cuda-compat',
      `remove cuda_compat's directories (entries matching ${CUDA_COMPAT_PATTERNS.join(' ')}), for a ` +
        'compat libcuda older than the kernel driver (CUDA error 803); not with --cuda-compat',
    )
    .option(
      '--remove-stubs',
      'add the stubs hook: the first CUDA stubs entry becomes DRIVER-LINK/lib (unless that came first), the others go',
    )
    .option(
      '--stubs-pattern <glob>',
      `what marks a stubs entry, a shell pattern on the whole entry; repeatable (default: ${NIXPKGS_STUBS_PATTERNS.join(' ')})`,
      collect,
    )
    .option('--config <file>', `more hooks from a JSON file, placing their entries with "precedes"/"follows" (see ${docPath('hooks.md')})`)
    .option(
      '--nixpkgs-compat',
      "byte-identical to Nixpkgs' hooks: no dedupe, trailing ':' for an empty runpath, DT_RPATH becomes DT_RUNPATH",
    )
    .option(
      '--make-writable',
      'apply: patch read-only files too (their mode is restored afterwards); plan, check, --dry-run: say what apply would do with it',
    )
    .option(
      '-j, --jobs <n>',
      `at most N threads patching files at once; never more than the CPUs (${cpuCount}) or the ELF ` +
        `files waiting (default: half the CPUs, at least 1: ${defaultJobs(cpuCount)} here; 1: no worker ` +
        `threads; at most ${MAX_JOBS})`,
    )
    .option(
      '--threads-from-start',
      'start the worker threads (--jobs, never more than the CPUs) with the batch and send them every ' +
        'ELF file (by default ELF files start them, one per file waiting, and wait for one to load, ' +
        'patched in this thread only if the walk ends first)',
    )
    .option('--json', 'write a JSON report to stdout instead of the text summary')
    .option('-q, --quiet', 'print nothing but errors (the exit code says the rest)')
    .option('-v, --verbose', 'also print a line for each file patched (or to patch), and for each ELF file left alone and why');
}

/** Every check of the command line that needs no file: a usage error here means nothing was read. */
function checkArguments(dirs: readonly string[], options: TreeOptions, command: Command): void {
  rejectEmptyPaths(dirs, 'output trees to walk');
  const given = (key: keyof TreeOptions): boolean => command.getOptionValueSource(key) === 'cli';
  if (!options.driver && given('driverLink') && !options.removeStubs) {
    throw new CudaPatchelfError('usage', '--driver-link has no effect with --no-driver (only --remove-stubs uses it then)');
  }
  if (options.stubsPattern !== undefined && !options.removeStubs)
    throw new CudaPatchelfError('usage', '--stubs-pattern needs --remove-stubs');
  if (options.dropCudaCompat && options.cudaCompat !== undefined)
    throw new CudaPatchelfError('usage', '--drop-cuda-compat removes the directory --cuda-compat adds: give one of them');
  if (options.quiet && options.verbose) throw new CudaPatchelfError('usage', '--quiet and --verbose contradict each other');
  if (options.json && (options.quiet || options.verbose))
    throw new CudaPatchelfError('usage', `--json reports every file; --${options.quiet ? 'quiet' : 'verbose'} is for the text output`);
}

/**
 * Every tree must exist (existingTrees), and none be named twice or inside another one named: its
 * files would be walked twice, patched twice under --nixpkgs-compat (each walk prepends again) and
 * counted as two names of one file. Trees are compared by their real paths.
 */
function rejectOverlappingTrees(dirs: readonly string[]): void {
  const real = existingTrees(dirs);
  const inside = (outer: string, inner: string): boolean => inner === outer || inner.startsWith(outer.endsWith('/') ? outer : `${outer}/`);
  for (const [i, a] of real.entries()) {
    for (const b of real.slice(i + 1)) {
      const [outer, inner] = inside(a.real, b.real) ? [a, b] : inside(b.real, a.real) ? [b, a] : [null, null];
      if (outer !== null && inner !== null) {
        const how = outer.real === inner.real ? 'is the same tree as' : 'lies inside';
        throw new CudaPatchelfError('usage', `${inner.dir} ${how} ${outer.dir}: name each tree once, none inside another`);
      }
    }
  }
}

/** `resolver`: --auto-patchelf is on, a hook of its own (composed first, outside this list). */
async function hooksFrom(options: TreeOptions, resolver: boolean): Promise<Hook[]> {
  const hooks: Hook[] = [];
  const driverLink = textToByteString(hookDirectory(options.driverLink, '--driver-link', false));
  if (options.driver) hooks.push(driverHook(driverLink));
  if (options.cudaCompat !== undefined)
    hooks.push(cudaCompatHook(textToByteString(hookDirectory(options.cudaCompat, '--cuda-compat', false))));
  if (options.removeStubs) {
    const patterns = options.stubsPattern?.map(textToByteString);
    // Compiled here so that a bad pattern is a usage error before any file is read.
    if (patterns !== undefined) stubsMatcher(patterns);
    hooks.push(removeStubsHook({ driverLink, ...(patterns === undefined ? {} : { patterns }) }));
  }
  if (options.dropCudaCompat) hooks.push(dropCudaCompatHook());
  if (options.config !== undefined) {
    let text: string;
    try {
      text = await readFile(options.config, 'utf8');
    } catch (error) {
      throw new CudaPatchelfError('usage', `cannot read the hook config: ${(error as Error).message}`, { file: options.config });
    }
    hooks.push(...parseHookConfig(options.config, text));
  }
  if (hooks.length === 0 && !resolver)
    throw new CudaPatchelfError(
      'usage',
      'no hooks: --no-driver without --auto-patchelf, --cuda-compat, --drop-cuda-compat, --remove-stubs or --config leaves nothing to do',
    );
  return orderHooks(hooks, BUILTIN_HOOK_NAMES);
}

function jobsOf(options: TreeOptions, io: CliIo): number {
  if (options.jobs === undefined) return defaultJobs(io.cpuCount);
  const jobs = Number(options.jobs);
  if (!Number.isInteger(jobs) || jobs < 1)
    throw new CudaPatchelfError('usage', `--jobs takes a positive whole number, not "${options.jobs}"`);
  if (jobs > MAX_JOBS)
    throw new CudaPatchelfError(
      'usage',
      `--jobs takes at most ${MAX_JOBS} (no Linux machine has more CPUs; a number above this one's ` +
        `${io.cpuCount} is capped at ${io.cpuCount}), not "${options.jobs}"`,
    );
  return jobs;
}

type TreeCommandName = 'apply' | 'check' | 'plan';

interface TreeRun extends BatchResult {
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

async function runTree(name: TreeCommandName, dirs: string[], options: TreeOptions, command: Command, io: CliIo): Promise<TreeRun> {
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

/**
 * --verbose: a line per file patched, and per ELF file left alone (not for files that are not ELF); a
 * file apply would refuse gets a second line that says so.
 */
function verboseLines(outcome: FileOutcome, verb: string): string[] {
  const path = oneLine(outcome.path);
  switch (outcome.status) {
    case 'patched':
    case 'would-refuse':
      return [`${verb} ${path}: ${text(outcome.oldRunpath)} -> ${text(outcome.newRunpath)}`, ...refusalLines(outcome)];
    case 'unchanged':
      return [`unchanged ${path}: ${text(outcome.runpath)}`];
    case 'skipped':
      return outcome.reason === 'not-elf' ? [] : [`skipped ${path}: ${outcome.reason}`];
    default:
      return [];
  }
}

/** Under a file to patch that apply would refuse to write: what apply would say, worded as no failure. */
const refusalLines = (outcome: PendingOutcome): string[] =>
  outcome.status === 'would-refuse' ? [`  apply would refuse it: ${oneLine(outcome.refusal)}`] : [];

const text = (value: string | null): string => (value === null ? '(none)' : `"${oneLine(byteStringToText(value))}"`);

function summaryLine(verb: string, run: TreeRun): string {
  const s = run.summary;
  // Sorted, so the line reads the same whatever order the files finished in.
  const counts = (record: Record<string, number>): string[] =>
    Object.keys(record)
      .sort()
      .map((key) => `${record[key] ?? 0} ${key}`);
  const tiers = counts(s.patched);
  const skipped = counts(s.skipped);
  return [
    `${s.visited} visited`,
    `${patchedCount(s)} ${verb}${tiers.length > 0 ? ` (${tiers.join(', ')})` : ''}`,
    // Only dry runs have these, and the line keeps its usual shape without them.
    ...(s.wouldRefuse > 0 ? [`${s.wouldRefuse} apply would refuse`] : []),
    `${s.unchanged} unchanged`,
    `skipped: ${skipped.length > 0 ? skipped.join(', ') : 'none'}`,
    `${s.failed} failed`,
    ...(run.missing.libraries > 0 ? [missingText(run.missing)] : []),
    `${s.bytesWritten} bytes written`,
    ...(run.resolution === null ? [] : [libcText(run.resolution)]),
  ].join(' · ');
}

/** A file's JSON: its outcome, and what the resolver found for it. */
function fileJson(outcome: FileOutcome, run: TreeRun): object {
  const report = run.resolution?.reports.get(outcome.path);
  return report === undefined ? outcomeJson(outcome, run.dryRun) : { ...outcomeJson(outcome, run.dryRun), ...resolverJson(report) };
}

/** A dry run's JSON says "would-patch" where a real run says "patched". */
function outcomeJson(outcome: FileOutcome, dryRun: boolean): object {
  switch (outcome.status) {
    case 'failed':
      return { path: outcome.path, status: outcome.status, error: errorJson(outcome.error) };
    case 'patched':
    case 'would-refuse': {
      const { path, status, ...change } = outcome;
      return {
        path,
        status: status === 'would-refuse' ? status : dryRun ? 'would-patch' : 'patched',
        ...change,
        oldRunpath: outcome.oldRunpath === null ? null : byteStringToText(outcome.oldRunpath),
        newRunpath: byteStringToText(outcome.newRunpath),
        entries: outcome.entries.map((e) => ({ dir: byteStringToText(e.dir), hook: e.hook })),
      };
    }
    case 'unchanged':
      return { ...outcome, runpath: outcome.runpath === null ? null : byteStringToText(outcome.runpath) };
    default:
      return outcome;
  }
}

/**
 * Version 4: with --auto-patchelf, each file the resolver applies to has `resolved` (its directories,
 * each with the names it resolves), `missing` and `ignoredMissing` (each dependency as its
 * alternatives) and `interpreter` ({old, new}) when --interpreter changes it; the summary has
 * `autoPatchelf` (`missing`, and the files left to the other hooks by reason), and `hooks` starts with
 * "auto-patchelf". Version 3: a dry run's files say "would-patch" or "would-refuse" (with `refusal`,
 * apply's words), and its summary counts them under `wouldPatch` and `wouldRefuse`; a real run has
 * neither. `interrupted`: Ctrl-C stopped apply, and `files` are the files done.
 */
function reportJson(io: CliIo, command: TreeCommandName, run: TreeRun, options: TreeOptions): void {
  const { visited, patched, wouldRefuse, ...counts } = run.summary;
  const planned = run.dryRun ? { wouldPatch: patched, wouldRefuse } : { patched };
  io.out(
    JSON.stringify(
      {
        version: 4,
        command,
        dryRun: run.dryRun,
        interrupted: run.interrupted,
        semantics: options.nixpkgsCompat ? 'nixpkgs-compat' : 'default',
        hooks: [...(run.resolution === null ? [] : [RESOLVER_HOOK_NAME]), ...run.hooks.map((h) => h.name)],
        jobs: { asked: run.jobs, limit: run.threadLimit },
        workerThreads: run.workerThreads,
        summary: {
          visited,
          ...planned,
          ...counts,
          ...(run.resolution === null
            ? {}
            : {
                autoPatchelf: {
                  missing: run.missing.libraries,
                  filesMissing: run.missing.files,
                  skipped: run.resolution.skipped,
                  libc: run.resolution.libc,
                },
              }),
        },
        files: run.outcomes.map((outcome) => fileJson(outcome, run)),
      },
      null,
      2,
    ),
  );
}

/** The hook behind a runpath entry; for the resolver's, the names it resolves: `auto-patchelf (libz.so.1)`. */
function entrySource(entry: TracedEntry, report: ResolverReport | undefined): string {
  if (entry.hook !== RESOLVER_HOOK_NAME) return entry.hook ?? 'file';
  const names = namesResolvedBy(report, entry.dir);
  return names === null ? entry.hook : `${entry.hook} (${names})`;
}

type PendingOutcome = Extract<FileOutcome, { status: 'patched' | 'would-refuse' }>;

/** The files a run patched, or in a dry run would patch or would have apply refuse: the files that need patching. */
const pendingOf = (run: TreeRun): PendingOutcome[] =>
  run.outcomes.filter((o): o is PendingOutcome => o.status === 'patched' || o.status === 'would-refuse');

/** `check`'s last line: "nothing to do" only when no file needs patching, none failed and no library is missing. */
function checkSummary(pending: number, s: BatchSummary, missing: MissingCount): string {
  if (pending === 0 && s.failed === 0 && missing.libraries === 0) return 'nothing to do';
  const refused = s.wouldRefuse > 0 ? ` (apply would refuse ${s.wouldRefuse} of them as they are)` : '';
  const needing =
    pending === 0 ? 'no other file needs patching' : `${counted(pending, 'file')} ${pending === 1 ? 'needs' : 'need'} patching${refused}`;
  const problems = [...(s.failed === 0 ? [] : [`${s.failed} failed`]), ...(missing.libraries === 0 ? [] : [missingText(missing)])];
  return [...problems, needing].join(', ');
}

/** Files that failed, or libraries the resolver found nowhere: exit 3, after every file was processed. */
const failedOrMissing = (run: TreeRun): boolean => run.summary.failed > 0 || run.missing.libraries > 0;

export function registerTreeCommands(program: Command, io: CliIo): void {
  withTreeOptions(program.command('apply'), io.cpuCount)
    .description('patch every dynamic ELF file under DIRS with the hooks, each file read once and written once')
    .option('--dry-run', 'plan only: report what would change, write nothing')
    .option('--durable', 'fsync between the data and the header writes')
    .action(async (dirs: string[], options: TreeOptions, command: Command) => {
      const run = await runTree('apply', dirs, options, command, io);
      if (run.interrupted) {
        io.err(
          `cuda-patchelf apply: interrupted: ${counted(run.summary.visited, 'file')} done ` +
            `(${patchedCount(run.summary)} patched), the others left untouched; apply again does the rest`,
        );
      }
      if (options.json) reportJson(io, 'apply', run, options);
      else if (!options.quiet) {
        io.out(`cuda-patchelf apply: ${summaryLine(run.dryRun ? 'would patch' : 'patched', run)}`);
        if (run.summary.patchedWithOtherLinks > 0) {
          io.out(
            `note: ${counted(run.summary.patchedWithOtherLinks, run.dryRun ? 'file to patch' : 'patched file', run.dryRun ? 'files to patch' : 'patched files')} ` +
              `${run.summary.patchedWithOtherLinks === 1 ? 'has' : 'have'} other hard links; the change shows through every link`,
          );
        }
      }
      if (run.release()) io.err('cuda-patchelf apply: Ctrl-C came when every file was done: nothing was left undone');
      io.setExitCode(run.interrupted ? EXIT.interrupted : failedOrMissing(run) ? EXIT.someFilesFailed : EXIT.ok);
    });

  withTreeOptions(program.command('check'), io.cpuCount)
    .description('change nothing; exit 1 listing every file apply would change (a CI gate)')
    .action(async (dirs: string[], options: TreeOptions, command: Command) => {
      const run = await runTree('check', dirs, options, command, io);
      const pending = pendingOf(run);
      if (options.json) reportJson(io, 'check', run, options);
      else if (!options.quiet) {
        // --verbose has listed them already, one line per file.
        if (!options.verbose) {
          for (const o of pending) {
            io.out(`${oneLine(o.path)}: ${text(o.oldRunpath)} -> ${text(o.newRunpath)}`);
            for (const line of refusalLines(o)) io.out(line);
          }
        }
        const libc = run.resolution === null ? '' : ` (${libcText(run.resolution)})`;
        io.out(`cuda-patchelf check: ${checkSummary(pending.length, run.summary, run.missing)}${libc}`);
      }
      io.setExitCode(failedOrMissing(run) ? EXIT.someFilesFailed : pending.length > 0 ? EXIT.checkFoundWork : EXIT.ok);
    });

  withTreeOptions(program.command('plan'), io.cpuCount)
    .description('per file: the old runpath, the new one, and the hook behind each entry')
    .action(async (dirs: string[], options: TreeOptions, command: Command) => {
      const run = await runTree('plan', dirs, options, command, io);
      if (options.json) reportJson(io, 'plan', run, options);
      else if (!options.quiet) {
        for (const o of pendingOf(run)) {
          io.out(`${oneLine(o.path)} (${o.tier})`);
          io.out(`  old: ${text(o.oldRunpath)}`);
          io.out(`  new: ${text(o.newRunpath)}`);
          const interpreter = run.resolution?.reports.get(o.path)?.interpreter ?? null;
          if (interpreter !== null) io.out(`  interpreter: ${text(interpreter.old)} -> ${text(interpreter.new)}`);
          for (const entry of o.entries)
            io.out(`    ${byteStringToText(entry.dir) || '(empty)'}  <- ${entrySource(entry, run.resolution?.reports.get(o.path))}`);
          for (const line of refusalLines(o)) io.out(line);
        }
        io.out(`cuda-patchelf plan: ${summaryLine('to patch', run)}`);
      }
      io.setExitCode(failedOrMissing(run) ? EXIT.someFilesFailed : EXIT.ok);
    });
}
