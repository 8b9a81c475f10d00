// `apply`, `check` and `plan`: the hooks over whole output trees.

import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { byteStringToText, textToByteString } from '../elf/byte-string.js';
import type { BatchResult } from '../batch/patch-tree.js';
import { patchedCount, type BatchSummary, type FileOutcome } from '../batch/file-outcome.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { BUILTIN_HOOK_NAMES, cudaCompatHook, DEFAULT_DRIVER_LINK, driverHook, removeStubsHook } from '../hooks/builtin-hooks.js';
import type { Semantics } from '../hooks/compose-hooks.js';
import { parseHookConfig } from '../hooks/hook-config.js';
import type { Hook } from '../hooks/hook.js';
import { orderHooks } from '../hooks/order-hooks.js';
import type { CliIo } from './cli-io.js';
import { EXIT } from './exit-codes.js';
import { errorJson, errorLine } from './report.js';
import { ProgressLine } from './progress-line.js';

interface TreeOptions {
  driver: boolean;
  driverLink: string;
  cudaCompat?: string;
  removeStubs?: boolean;
  stubsPattern: string;
  config?: string;
  nixpkgsCompat?: boolean;
  jobs?: string;
  json?: boolean;
  dryRun?: boolean;
  durable?: boolean;
  makeWritable?: boolean;
}

/**
 * Patching threads by default: half the CPUs. A thread patching files keeps about 1.5 cores busy (V8
 * compiles and collects garbage beside it on threads of its own, and each worker compiles the code
 * anew), so one thread per CPU oversubscribes them: measured on 2 CPUs, --jobs 1 beats --jobs 2; on 16,
 * --jobs 8 beats --jobs 16 (README, Threads).
 */
export function defaultJobs(cpuCount: number): number {
  return Math.max(1, Math.floor(cpuCount / 2));
}

function withTreeOptions(command: Command, cpuCount: number): Command {
  return command
    .argument('<dirs...>', 'output trees (or single files) to walk')
    .option('--no-driver', 'leave out the driver hook (Nixpkgs: dontUseAutoAddDriverRunpath)')
    .option('--driver-link <dir>', 'the driver link; the hook adds DIR/lib (DIR-32/lib for i386 files)', DEFAULT_DRIVER_LINK)
    .option('--cuda-compat <dir>', 'add the cuda_compat hook: DIR/compat goes before the driver directory')
    .option('--remove-stubs', 'add the hook that drops runpath entries pointing into lib/stubs')
    .option('--stubs-pattern <fragment>', 'what marks a stubs entry for --remove-stubs', '/lib/stubs')
    .option('--config <file>', 'more hooks from a JSON file (see README)')
    .option('--nixpkgs-compat', "byte-identical to Nixpkgs' hooks: no dedupe, trailing ':' for an empty runpath, DT_RPATH becomes DT_RUNPATH")
    .option('-j, --jobs <n>', `threads patching files at once (default: ${defaultJobs(cpuCount)}, half the CPUs; 1: no worker threads)`)
    .option('--json', 'write a JSON report to stdout instead of the text summary');
}

async function hooksFrom(options: TreeOptions): Promise<Hook[]> {
  const hooks: Hook[] = [];
  if (options.driver) hooks.push(driverHook(textToByteString(options.driverLink)));
  if (options.cudaCompat !== undefined) hooks.push(cudaCompatHook(textToByteString(options.cudaCompat)));
  if (options.removeStubs) hooks.push(removeStubsHook(textToByteString(options.stubsPattern)));
  if (options.config !== undefined) {
    let text: string;
    try {
      text = await readFile(options.config, 'utf8');
    } catch (error) {
      throw new CudaPatchelfError('usage', `cannot read the hook config: ${(error as Error).message}`, { file: options.config });
    }
    hooks.push(...parseHookConfig(options.config, text));
  }
  if (hooks.length === 0) throw new CudaPatchelfError('usage', 'no hooks: --no-driver without --cuda-compat, --remove-stubs or --config leaves nothing to do');
  return orderHooks(hooks, BUILTIN_HOOK_NAMES);
}

function jobsOf(options: TreeOptions, io: CliIo): number {
  if (options.jobs === undefined) return defaultJobs(io.cpuCount);
  const jobs = Number(options.jobs);
  if (!Number.isInteger(jobs) || jobs < 1) throw new CudaPatchelfError('usage', `--jobs takes a positive whole number, not "${options.jobs}"`);
  return jobs;
}

async function runTree(dirs: string[], options: TreeOptions, io: CliIo, dryRun: boolean): Promise<BatchResult & { hooks: Hook[] }> {
  const hooks = await hooksFrom(options);
  const semantics: Semantics = options.nixpkgsCompat ? 'nixpkgs-compat' : 'default';
  const progress = io.stderrIsTty && !options.json ? new ProgressLine(io) : null;
  const jobs = jobsOf(options, io);
  // Loaded here, not at start-up: the batch modules (the walk, picomatch, p-limit) cost the
  // single-file commands time they do not need.
  const { patchTrees } = await import('../batch/patch-tree.js');
  const result = await patchTrees(dirs, {
    hooks,
    semantics,
    jobs,
    dryRun,
    durable: options.durable === true,
    makeWritable: options.makeWritable === true,
    onOutcome: (outcome, bytes) => {
      if (outcome.status === 'failed') progress?.clear();
      if (outcome.status === 'failed') io.err(errorLine(outcome.error, outcome.path));
      progress?.update(bytes);
    },
  });
  progress?.clear();
  return { ...result, hooks };
}

const text = (value: string | null): string => (value === null ? '(none)' : `"${byteStringToText(value)}"`);

function summaryLine(verb: string, s: BatchSummary): string {
  // Sorted, so the line reads the same whatever order the files finished in.
  const counts = (record: Record<string, number>): string[] => Object.keys(record).sort().map((key) => `${record[key] ?? 0} ${key}`);
  const tiers = counts(s.patched);
  const skipped = counts(s.skipped);
  return [
    `${s.visited} visited`,
    `${patchedCount(s)} ${verb}${tiers.length > 0 ? ` (${tiers.join(', ')})` : ''}`,
    `${s.unchanged} unchanged`,
    `skipped: ${skipped.length > 0 ? skipped.join(', ') : 'none'}`,
    `${s.failed} failed`,
    `${s.bytesWritten} bytes written`,
  ].join(' · ');
}

function outcomeJson(outcome: FileOutcome): object {
  switch (outcome.status) {
    case 'failed':
      return { path: outcome.path, status: outcome.status, error: errorJson(outcome.error) };
    case 'patched':
      return {
        ...outcome,
        oldRunpath: outcome.oldRunpath === null ? null : byteStringToText(outcome.oldRunpath),
        newRunpath: byteStringToText(outcome.newRunpath),
        entries: outcome.entries.map((e) => ({ dir: byteStringToText(e.dir), hook: e.hook })),
      };
    case 'unchanged':
      return { ...outcome, runpath: outcome.runpath === null ? null : byteStringToText(outcome.runpath) };
    default:
      return outcome;
  }
}

function reportJson(io: CliIo, command: string, result: BatchResult & { hooks: Hook[] }, options: TreeOptions, dryRun: boolean): void {
  io.out(
    JSON.stringify(
      {
        version: 1,
        command,
        dryRun,
        semantics: options.nixpkgsCompat ? 'nixpkgs-compat' : 'default',
        hooks: result.hooks.map((h) => h.name),
        summary: result.summary,
        files: result.outcomes.map(outcomeJson),
      },
      null,
      2,
    ),
  );
}

export function registerTreeCommands(program: Command, io: CliIo): void {
  withTreeOptions(program.command('apply'), io.cpuCount)
    .description('patch every dynamic ELF file under DIRS with the hooks, each file read once and written once')
    .option('--dry-run', 'plan only: report what would change, write nothing')
    .option('--durable', 'fsync between the data and the header writes')
    .option('--make-writable', 'patch read-only files too (their mode is restored afterwards)')
    .action(async (dirs: string[], options: TreeOptions) => {
      const dryRun = options.dryRun === true;
      const result = await runTree(dirs, options, io, dryRun);
      if (options.json) reportJson(io, 'apply', result, options, dryRun);
      else {
        io.out(`cuda-patchelf apply: ${summaryLine(dryRun ? 'would patch' : 'patched', result.summary)}`);
        if (result.summary.patchedWithOtherLinks > 0) {
          io.out(`note: ${result.summary.patchedWithOtherLinks} patched file(s) have other hard links; the change shows through every link`);
        }
      }
      io.setExitCode(result.summary.failed > 0 ? EXIT.someFilesFailed : EXIT.ok);
    });

  withTreeOptions(program.command('check'), io.cpuCount)
    .description('change nothing; exit 1 listing every file apply would change (a CI gate)')
    .action(async (dirs: string[], options: TreeOptions) => {
      const result = await runTree(dirs, options, io, true);
      const pending = result.outcomes.filter((o): o is Extract<FileOutcome, { status: 'patched' }> => o.status === 'patched');
      if (options.json) reportJson(io, 'check', result, options, true);
      else {
        for (const o of pending) io.out(`${o.path}: ${text(o.oldRunpath)} -> ${text(o.newRunpath)}`);
        io.out(`cuda-patchelf check: ${pending.length === 0 ? 'nothing to do' : `${pending.length} file(s) need patching`}`);
      }
      io.setExitCode(result.summary.failed > 0 ? EXIT.someFilesFailed : pending.length > 0 ? EXIT.checkFoundWork : EXIT.ok);
    });

  withTreeOptions(program.command('plan'), io.cpuCount)
    .description('per file: the old runpath, the new one, and the hook behind each entry')
    .action(async (dirs: string[], options: TreeOptions) => {
      const result = await runTree(dirs, options, io, true);
      if (options.json) reportJson(io, 'plan', result, options, true);
      else {
        for (const o of result.outcomes) {
          if (o.status !== 'patched') continue;
          io.out(`${o.path} (${o.tier})`);
          io.out(`  old: ${text(o.oldRunpath)}`);
          io.out(`  new: ${text(o.newRunpath)}`);
          for (const entry of o.entries) io.out(`    ${byteStringToText(entry.dir) || '(empty)'}  <- ${entry.hook ?? 'file'}`);
        }
        io.out(`cuda-patchelf plan: ${summaryLine('to patch', result.summary)}`);
      }
      io.setExitCode(result.summary.failed > 0 ? EXIT.someFilesFailed : EXIT.ok);
    });
}
