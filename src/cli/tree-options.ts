// The options `apply`, `check` and `plan` share, and what they become: the hooks and the threads.

import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { byteStringToText, textToByteString } from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import {
  BUILTIN_HOOK_NAMES,
  CUDA_COMPAT_PATTERNS,
  cudaCompatHook,
  DEFAULT_DRIVER_LINK,
  driverHook,
  dropCudaCompatHook,
  removeStubsHook,
} from '../hook-engine/builtin-hooks.js';
import { parseHookConfig } from '../hook-engine/hook-config.js';
import type { Hook } from '../hook-engine/hook.js';
import { orderHooks } from '../hook-engine/order-hooks.js';
import { hookDirectory } from '../hook-engine/runpath-entry.js';
import { NIXPKGS_STUBS_PATTERNS, stubsMatcher } from '../hook-engine/stubs-pattern.js';
import { type AutoPatchelfFlags, withAutoPatchelfOptions } from './auto-patchelf-options.js';
import type { CliIo } from './cli-io.js';
import { docPath } from './package-files.js';
import { existingTrees, rejectEmptyPaths } from './report.js';

export interface TreeOptions extends AutoPatchelfFlags {
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

export function withTreeOptions(command: Command, cpuCount: number): Command {
  return withAutoPatchelfOptions(command.argument('<dirs...>', 'output trees (or single files) to walk'))
    .option('--no-driver', 'leave out the driver hook (Nixpkgs: dontUseAutoAddDriverRunpath)')
    .option('--driver-link <dir>', 'the driver link, absolute; the hook adds DIR/lib (DIR-32/lib for i386 files)', DEFAULT_DRIVER_LINK)
    .option('--cuda-compat <dir>', 'add the cuda_compat hook (absolute DIR): DIR/compat goes before the driver directory')
    .option(
      '--drop-cuda-compat',
      `remove cuda_compat's directories (entries matching ${CUDA_COMPAT_PATTERNS.map(byteStringToText).join(' ')}), for a ` +
        'compat libcuda older than the kernel driver (CUDA error 803); not with --cuda-compat',
    )
    .option(
      '--remove-stubs',
      'add the stubs hook: the first CUDA stubs entry becomes DRIVER-LINK/lib (unless that came first), the others go',
    )
    .option(
      '--stubs-pattern <glob>',
      `what marks a stubs entry, a shell pattern on the whole entry; repeatable (default: ${NIXPKGS_STUBS_PATTERNS.map(byteStringToText).join(' ')})`,
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
export function checkArguments(dirs: readonly string[], options: TreeOptions, command: Command): void {
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
export function rejectOverlappingTrees(dirs: readonly string[]): void {
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
export async function hooksFrom(options: TreeOptions, resolver: boolean): Promise<Hook[]> {
  const hooks: Hook[] = [];
  const driverLink = hookDirectory(options.driverLink, '--driver-link', false);
  if (options.driver) hooks.push(driverHook(driverLink));
  if (options.cudaCompat !== undefined) hooks.push(cudaCompatHook(hookDirectory(options.cudaCompat, '--cuda-compat', false)));
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

export function jobsOf(options: TreeOptions, io: CliIo): number {
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
