// What `apply`, `check` and `plan` print: the lines per file, the summary line, the JSON report.

import { type BatchSummary, type FileOutcome, patchedCount } from '../batch/file-outcome.js';
import type { ResolverReport } from '../batch/resolve-trees.js';
import { type ByteString, byteStringToText } from '../elf/elf.js';
import { oneLine } from '../errors/cuda-patchelf-error.js';
import { RESOLVER_HOOK_NAME } from '../hook-engine/compose-hooks.js';
import type { TracedEntry } from '../hook-engine/hook.js';
import { libcText, type MissingCount, missingText, namesResolvedBy, resolverJson } from './auto-patchelf-options.js';
import type { CliIo } from './cli-io.js';
import { counted, errorJson } from './report.js';
import type { TreeOptions } from './tree-options.js';
import type { TreeCommandName, TreeRun } from './tree-run.js';

/**
 * --verbose: a line per file patched, and per ELF file left alone (not for files that are not ELF); a
 * file apply would refuse gets a second line that says so.
 */
export function verboseLines(outcome: FileOutcome, verb: string): string[] {
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
export const refusalLines = (outcome: PendingOutcome): string[] =>
  outcome.status === 'would-refuse' ? [`  apply would refuse it: ${oneLine(outcome.refusal)}`] : [];

export const text = (value: ByteString | null): string => (value === null ? '(none)' : `"${oneLine(byteStringToText(value))}"`);

export function summaryLine(verb: string, run: TreeRun): string {
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
export function reportJson(io: CliIo, command: TreeCommandName, run: TreeRun, options: TreeOptions): void {
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
export function entrySource(entry: TracedEntry, report: ResolverReport | undefined): string {
  if (entry.hook !== RESOLVER_HOOK_NAME) return entry.hook ?? 'file';
  const names = namesResolvedBy(report, entry.dir);
  return names === null ? entry.hook : `${entry.hook} (${names})`;
}

export type PendingOutcome = Extract<FileOutcome, { status: 'patched' | 'would-refuse' }>;

/** The files a run patched, or in a dry run would patch or would have apply refuse: the files that need patching. */
export const pendingOf = (run: TreeRun): PendingOutcome[] =>
  run.outcomes.filter((o): o is PendingOutcome => o.status === 'patched' || o.status === 'would-refuse');

/** `check`'s last line: "nothing to do" only when no file needs patching, none failed and no library is missing. */
export function checkSummary(pending: number, s: BatchSummary, missing: MissingCount): string {
  if (pending === 0 && s.failed === 0 && missing.libraries === 0) return 'nothing to do';
  const refused = s.wouldRefuse > 0 ? ` (apply would refuse ${s.wouldRefuse} of them as they are)` : '';
  const needing =
    pending === 0 ? 'no other file needs patching' : `${counted(pending, 'file')} ${pending === 1 ? 'needs' : 'need'} patching${refused}`;
  const problems = [...(s.failed === 0 ? [] : [`${s.failed} failed`]), ...(missing.libraries === 0 ? [] : [missingText(missing)])];
  return [...problems, needing].join(', ');
}

/** Files that failed, or libraries the resolver found nowhere: exit 3, after every file was processed. */
export const failedOrMissing = (run: TreeRun): boolean => run.summary.failed > 0 || run.missing.libraries > 0;
