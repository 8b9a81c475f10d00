// The shapes of what apply/check/plan print (README: "JSON report", the summary line, plan blocks), read
// back strictly so a test fails on any drift in format as well as in content.

import { availableParallelism } from 'node:os';

export interface ReportEntry {
  readonly dir: string;
  readonly hook: string | null;
}

export interface ReportFile {
  readonly path: string;
  /**
   * A dry run (check, plan, apply --dry-run) says `would-patch` where apply says `patched`, and
   * `would-refuse` for a file to patch that apply would refuse to write (where apply says `failed`).
   */
  readonly status: 'patched' | 'would-patch' | 'would-refuse' | 'unchanged' | 'skipped' | 'failed';
  readonly reason?: string;
  readonly detail?: string;
  readonly tier?: string;
  readonly oldRunpath?: string | null;
  readonly newRunpath?: string;
  readonly entries?: readonly ReportEntry[];
  readonly bytesWritten?: number;
  readonly otherLinks?: number;
  readonly runpath?: string | null;
  /** `would-refuse`: what apply would say. */
  readonly refusal?: string;
  readonly error?: { readonly kind: string; readonly message: string; readonly offset: number | null };
}

export interface ReportSummary {
  readonly visited: number;
  /** Files patched by tier; in a dry run this key is `wouldPatch` instead. */
  readonly patched: Record<string, number>;
  readonly unchanged: number;
  readonly skipped: Record<string, number>;
  /** Dry runs only: files to patch that apply would refuse to write. */
  readonly wouldRefuse?: number;
  readonly failed: number;
  readonly bytesWritten: number;
  readonly patchedWithOtherLinks: number;
}

export interface TreeReport {
  readonly version: number;
  readonly command: string;
  readonly dryRun: boolean;
  /** Ctrl-C stopped apply: `files` are the files done. */
  readonly interrupted: boolean;
  readonly semantics: string;
  readonly hooks: readonly string[];
  /** --jobs as given (or its default), and the most threads the run could use: that, capped at the CPUs. */
  readonly jobs: { readonly asked: number; readonly limit: number };
  /** Worker threads the run started. */
  readonly workerThreads: number;
  readonly summary: ReportSummary;
  readonly files: readonly ReportFile[];
}

/**
 * Reads a version 4 report strictly: a dry run's files say `would-patch` (never `patched`) or
 * `would-refuse`, and its summary counts them under `wouldPatch` and `wouldRefuse`; a real run says
 * `patched` and has neither. The summary comes back with the patched count under `patched` in both
 * cases, so that tests compare counts whatever the run.
 */
export function parseReport(stdout: string): TreeReport {
  const report = JSON.parse(stdout) as TreeReport & { summary: { wouldPatch?: Record<string, number> } };
  if (
    report.version !== 4 ||
    !Array.isArray(report.files) ||
    typeof report.summary !== 'object' ||
    typeof report.jobs?.asked !== 'number' ||
    typeof report.jobs.limit !== 'number'
  ) {
    throw new Error(`not a version 4 tree report:\n${stdout.slice(0, 2000)}`);
  }
  const [present, absent, wrongStatus] = report.dryRun
    ? (['wouldPatch', 'patched', ['patched']] as const)
    : (['patched', 'wouldPatch', ['would-patch', 'would-refuse']] as const);
  const dryRunKeys = report.dryRun === 'wouldRefuse' in report.summary;
  if (
    !(present in report.summary) ||
    absent in report.summary ||
    !dryRunKeys ||
    report.files.some((file) => (wrongStatus as readonly string[]).includes(file.status))
  ) {
    throw new Error(
      `a ${report.dryRun ? 'dry-run' : 'real'} report must count files under "${present}" and never say ${wrongStatus.join(' or ')}:\n${stdout.slice(0, 2000)}`,
    );
  }
  const { wouldPatch, ...summary } = report.summary;
  return { ...report, summary: { ...summary, patched: wouldPatch ?? summary.patched } };
}

export interface SummaryLine {
  readonly command: string;
  readonly visited: number;
  readonly patched: number;
  readonly tiers: Record<string, number>;
  /** Dry runs: files to patch that apply would refuse (the segment is there only when some are). */
  readonly wouldRefuse: number;
  readonly unchanged: number;
  readonly skipped: Record<string, number>;
  readonly failed: number;
  readonly bytesWritten: number;
}

const SUMMARY =
  /^cuda-patchelf (apply|plan): (\d+) visited · (\d+) (?:patched|would patch|to patch)(?: \(([^)]*)\))?(?: · (\d+) apply would refuse)? · (\d+) unchanged · skipped: (.*?) · (\d+) failed · (\d+) bytes written$/;

function counts(list: string): Record<string, number> {
  const result: Record<string, number> = {};
  if (list === '' || list === 'none') return result;
  for (const item of list.split(', ')) {
    const match = /^(\d+) (\S+)$/.exec(item);
    if (match === null) throw new Error(`cannot read "${item}" in a summary count list "${list}"`);
    result[match[2] as string] = Number(match[1]);
  }
  return result;
}

/** The one summary line of apply/plan output; throws unless exactly one line matches. */
export function parseSummaryLine(stdout: string): SummaryLine {
  const lines = stdout.split('\n').filter((line) => SUMMARY.test(line));
  if (lines.length !== 1) throw new Error(`expected one summary line, found ${lines.length} in:\n${stdout}`);
  const m = SUMMARY.exec(lines[0] as string) as RegExpExecArray;
  return {
    command: m[1] as string,
    visited: Number(m[2]),
    patched: Number(m[3]),
    tiers: counts(m[4] ?? ''),
    wouldRefuse: Number(m[5] ?? 0),
    unchanged: Number(m[6]),
    skipped: counts(m[7] as string),
    failed: Number(m[8]),
    bytesWritten: Number(m[9]),
  };
}

export interface PlanBlock {
  readonly path: string;
  readonly tier: string;
  readonly old: string | null;
  readonly new: string;
  readonly entries: readonly ReportEntry[];
  /** What apply would say refusing the file (`  apply would refuse it: …`), or null. */
  readonly refusal: string | null;
}

/** The line under a file to patch that apply would refuse, in plan and check output. */
const REFUSAL = /^ {2}apply would refuse it: (.+)$/;

/** A runpath as plan/check print it: `(none)` or the value in double quotes. */
function quoted(text: string): string | null {
  if (text === '(none)') return null;
  const match = /^"(.*)"$/.exec(text);
  if (match === null) throw new Error(`expected a quoted runpath or (none), got ${text}`);
  return match[1] as string;
}

/** `plan` output: one block per file it would patch, then the summary line. */
export function parsePlan(stdout: string): PlanBlock[] {
  const blocks: PlanBlock[] = [];
  const lines = stdout.split('\n').filter((line) => line !== '');
  let i = 0;
  while (i < lines.length && !(lines[i] as string).startsWith('cuda-patchelf plan: ')) {
    const head = /^(\/.*) \(([\w-]+)\)$/.exec(lines[i] as string);
    const old = /^ {2}old: (.*)$/.exec(lines[i + 1] ?? '');
    const now = /^ {2}new: (.*)$/.exec(lines[i + 2] ?? '');
    if (head === null || old === null || now === null)
      throw new Error(`unexpected plan output at line ${i + 1}:\n${lines.slice(i, i + 3).join('\n')}`);
    i += 3;
    const entries: ReportEntry[] = [];
    for (let entry = /^ {4}(.*) {2}<- (\S+)$/.exec(lines[i] ?? ''); entry !== null; entry = /^ {4}(.*) {2}<- (\S+)$/.exec(lines[i] ?? '')) {
      entries.push({ dir: entry[1] === '(empty)' ? '' : (entry[1] as string), hook: entry[2] === 'file' ? null : (entry[2] as string) });
      i++;
    }
    const refusal = REFUSAL.exec(lines[i] ?? '');
    if (refusal !== null) i++;
    blocks.push({
      path: head[1] as string,
      tier: head[2] as string,
      old: quoted(old[1] as string),
      new: quoted(now[1] as string) ?? '',
      entries,
      refusal: refusal?.[1] ?? null,
    });
  }
  if (i !== lines.length - 1) throw new Error(`plan output does not end with its summary line:\n${stdout}`);
  return blocks;
}

export interface CheckLine {
  readonly path: string;
  readonly old: string | null;
  readonly new: string;
  /** What apply would say refusing the file, or null. */
  readonly refusal: string | null;
}

/**
 * `check` output: one line per file it would change (followed by `  apply would refuse it: …` for a
 * file apply would refuse), then `cuda-patchelf check: …`.
 */
export function parseCheck(stdout: string): { files: CheckLine[]; last: string } {
  const lines = stdout.split('\n').filter((line) => line !== '');
  const last = lines.pop() ?? '';
  const files: CheckLine[] = [];
  for (const line of lines) {
    const refusal = REFUSAL.exec(line);
    const previous = files.pop();
    if (refusal !== null && previous !== undefined && previous.refusal === null) {
      files.push({ ...previous, refusal: refusal[1] as string });
      continue;
    }
    if (previous !== undefined) files.push(previous);
    const match = /^(\/.*?): ((?:"[^"]*")|\(none\)) -> ("[^"]*")$/.exec(line);
    if (match === null) throw new Error(`unexpected check output line: ${line}`);
    files.push({ path: match[1] as string, old: quoted(match[2] as string), new: quoted(match[3] as string) ?? '', refusal: null });
  }
  return { files, last };
}

/** The most threads `--jobs N` may use in a CLI started from this process: N, capped at the CPUs it may run on. */
export function threadLimitHere(jobs: number): number {
  return Math.min(jobs, availableParallelism());
}

/** The worker threads of a full pool here (--threads-from-start, or many ELF files): that limit, none where it is 1. */
export function fullPoolHere(jobs: number): number {
  const limit = threadLimitHere(jobs);
  return limit > 1 ? limit : 0;
}
