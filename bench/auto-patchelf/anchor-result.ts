// One anchor run on one case, as data: per ELF file what it set and what it resolved (read back from
// the copy), what it could not find; per run the time, the peak RSS and the exit code. run-anchor.ts
// saves it as JSON per case (bench/.cache/auto-patchelf/anchor/<case>.json).

import { mkdir, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Measurement } from '../lib/measure.js';
import { anchorArgv, anchorEnv, type AnchorLog, parseAnchorLog } from './anchor.js';
import { AP_CACHE, type AutoPatchelfCase, masked, type PatchelfVersion } from './cases.js';
import { type ElfFacts, readElfFacts, realDirectory, runpathDirs } from './read-back.js';
import { type TimedRun, timedRunOnCopy } from './timed-run.js';

export interface FileResult {
  /** Relative to the copy. */
  readonly path: string;
  readonly machine: string;
  /** DT_NEEDED, before the run. */
  readonly needed: readonly string[];
  /** Why the anchor skipped it (its words, the details in parentheses left out), or null. */
  readonly skipped: string | null;
  readonly interpreter: { readonly before: string | null; readonly after: string | null };
  readonly interpreterSet: boolean;
  readonly runpath: { readonly before: string | null; readonly after: string | null };
  readonly runpathSet: boolean;
  /** The directories the runpath names afterwards, `$ORIGIN` expanded, `<tree>/...` inside the copy. */
  readonly resolved: readonly string[];
  /** What it resolved through its index, and where (the directory's real path). */
  readonly found: readonly { readonly name: string; readonly dir: string }[];
  readonly missing: readonly string[];
  readonly ignoredMissing: readonly string[];
}

export interface RunSummary {
  readonly files: number;
  /** Files it ran patchelf on (interpreter or runpath). */
  readonly patched: number;
  readonly interpreterSet: number;
  readonly runpathSet: number;
  readonly skipped: Readonly<Record<string, number>>;
  readonly missing: number;
  readonly ignoredMissing: number;
}

export interface AnchorResult {
  readonly case: string;
  /** The command line, the copy written `<tree>`. */
  readonly argv: readonly string[];
  readonly patchelf: PatchelfVersion;
  readonly exit: number;
  readonly summary: RunSummary;
  /** Every run of every patchelf version, in order. */
  readonly timings: readonly { readonly patchelf: PatchelfVersion; readonly m: Measurement }[];
  readonly files: readonly FileResult[];
}

const byFile = (entries: readonly { name: string; file: string }[], copy: string): Map<string, string[]> => {
  const map = new Map<string, string[]>();
  for (const { name, file } of entries) {
    const rel = relative(copy, file);
    map.set(rel, [...(map.get(rel) ?? []), name]);
  }
  return map;
};

/** What readelf shows of one file before and after a run (either side's), and the directories its runpath names. */
export function readBack(copy: string, path: string, before: ElfFacts | undefined, after: ElfFacts) {
  return {
    path,
    machine: after.machine,
    needed: before?.needed ?? [],
    interpreter: { before: before?.interpreter ?? null, after: after.interpreter },
    runpath: { before: before?.runpath ?? null, after: after.runpath },
    resolved: runpathDirs(after.runpath, copy, path),
  };
}

/** The per-file results of one run: the log read against what readelf shows before and after. */
function fileResults(
  copy: string,
  before: ReadonlyMap<string, ElfFacts>,
  after: ReadonlyMap<string, ElfFacts>,
  log: AnchorLog,
): FileResult[] {
  const missing = byFile(log.missing, copy);
  const ignored = byFile(log.ignored, copy);
  return [...after].map(([path, facts]) => {
    const said = log.files.get(join(copy, path));
    return {
      ...readBack(copy, path, before.get(path), facts),
      skipped: said?.skipped?.replace(/\s*\([^)]*\)/g, '') ?? null,
      interpreterSet: said?.interpreterSet ?? false,
      runpathSet: (said?.runpathSet ?? null) !== null,
      found: (said?.found ?? []).map(({ name, dir }) => ({ name, dir: realDirectory(copy, dir) })),
      missing: missing.get(path) ?? [],
      ignoredMissing: ignored.get(path) ?? [],
    };
  });
}

/**
 * The anchor on a fresh copy of the case's tree at `copy`, and what it did to each of `elfFiles`
 * (`before`: their facts in the pristine tree). Exit 1 (a library missing) is a result.
 */
export async function anchorOnCopy(
  c: AutoPatchelfCase,
  copy: string,
  patchelf: PatchelfVersion,
  before: ReadonlyMap<string, ElfFacts>,
): Promise<{ run: TimedRun; files: FileResult[] }> {
  const run = await timedRunOnCopy(c.tree, copy, anchorArgv(c, copy), anchorEnv(c, patchelf));
  if (run.exit !== 0 && run.exit !== 1) throw new Error(`${c.name}: auto-patchelf.py exited with ${run.exit}: ${run.stderr}`);
  const after = await readElfFacts(copy, [...before.keys()]);
  return { run, files: fileResults(copy, before, after, parseAnchorLog(run.stdout)) };
}

export function summarize(files: readonly FileResult[]): RunSummary {
  const skipped: Record<string, number> = {};
  for (const file of files) if (file.skipped !== null) skipped[file.skipped] = (skipped[file.skipped] ?? 0) + 1;
  const count = (pick: (file: FileResult) => boolean | number): number => files.reduce((n, file) => n + Number(pick(file)), 0);
  return {
    files: files.length,
    patched: count((file) => file.interpreterSet || file.runpathSet),
    interpreterSet: count((file) => file.interpreterSet),
    runpathSet: count((file) => file.runpathSet),
    skipped,
    missing: count((file) => file.missing.length),
    ignoredMissing: count((file) => file.ignoredMissing.length),
  };
}

/** The anchor's command line for the record, with the copy written `<tree>`. */
export const recordedArgv = (c: AutoPatchelfCase, copy: string): string[] => anchorArgv(c, copy).map((arg) => masked(copy, arg));

const resultFile = (name: string): string => join(AP_CACHE, 'anchor', `${name}.json`);

export async function saveAnchorResult(result: AnchorResult): Promise<string> {
  await mkdir(join(AP_CACHE, 'anchor'), { recursive: true });
  await writeFile(resultFile(result.case), `${JSON.stringify(result, null, 2)}\n`);
  return resultFile(result.case);
}
