// `apply`, `check` and `plan`: the hooks over whole output trees.

import type { Command } from 'commander';
import { patchedCount } from '../batch/file-outcome.js';
import { byteStringToText } from '../elf/elf.js';
import { oneLine } from '../errors/cuda-patchelf-error.js';
import { libcText } from './auto-patchelf-options.js';
import type { CliIo } from './cli-io.js';
import { EXIT } from './exit-codes.js';
import { counted } from './report.js';
import { type TreeOptions, withTreeOptions } from './tree-options.js';
import { checkSummary, entrySource, failedOrMissing, pendingOf, refusalLines, reportJson, summaryLine, text } from './tree-report.js';
import { runTree } from './tree-run.js';

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
