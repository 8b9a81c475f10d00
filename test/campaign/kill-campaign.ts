// Kill campaign: `cuda-patchelf apply --cuda-compat` over a tree of real ELF files, killed with SIGKILL
// at random moments. After each kill every file must be byte-identical to its original, completely
// patched (byte-identical to an uninterrupted run), or — when the kill fell between the writes of one
// file — exactly the original with a prefix of its plan's writes (the last one possibly cut at a page,
// where the kernel stops a write for a fatal signal), which must load. A second apply must then finish
// the job: exit 0, every file as an uninterrupted run leaves it (or, for a prefix, with the new runpath
// and loadable), and `check` exits 0.
//
// Writes take microseconds and reading and planning most of a run, so few kills land between the
// writes of one file. Runs with --durable (an fsync between the phases of each file's writes, on a
// tree on a disk) spend most of their time there: every `durableEvery`th run is one of those.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cp, mkdir, readFile, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { textToByteString } from '../../src/elf/byte-string.js';
import type { Plan, PlannedWrite } from '../../src/plan/plan.js';
import { ldList } from '../helpers/fixtures.js';
import { planFile } from '../helpers/fuzz-plan-file.js';
import { rng, type Rng } from '../helpers/fuzz-mutations.js';
import { assembleElfTree, type ElfTreeFile, type ElfTreeSource } from '../helpers/kill-tree.js';
import { mapLimited } from '../helpers/map-limited.js';
import { parseReport } from '../helpers/tree-report.js';
import { sha256File } from '../helpers/tree-tools.js';
import { effectiveRunpath, readDynamic } from '../helpers/readelf.js';
import { isBuildArch } from '../helpers/arch.js';

export const COMPAT_DIR = '/nix/store/00000000000000000000000000000000-cuda_compat';
const PAGE = 4096;

export interface KillCampaignConfig {
  readonly sources: readonly ElfTreeSource[];
  readonly maxFileBytes: number;
  /** Runs that must end by SIGKILL (runs that finish first are counted apart and do not count). */
  readonly kills: number;
  readonly seed: number;
  /** Holds the pristine tree and the working copy. */
  readonly scratch: string;
  /** The built CLI (dist/cli/main.js). */
  readonly cli: string;
  /** Completely patched files loaded again after each kill (all of them were loaded once). */
  readonly loadSample: number;
  /** Every this many runs, the killed run has --durable (0: never). */
  readonly durableEvery: number;
  readonly log?: (line: string) => void;
}

/** What a kill campaign counts, whatever it kills: the kills and the states they left the files in. */
export interface KillStateCounts {
  kills: number;
  durableKills: number;
  finishedBeforeKill: number;
  /** Over all kills: files found byte-identical to the original, completely patched, a plan prefix. */
  original: number;
  complete: number;
  prefix: number;
  /** Files in no state an order of writes explains, or that do not load (or run) when the original did. */
  broken: number;
  /** Files the second run left other than an uninterrupted run does (or, from a prefix, not as tools read the result). */
  unfinished: number;
}

/** The counts before the first kill. */
export const NO_KILLS: Readonly<KillStateCounts> = {
  kills: 0,
  durableKills: 0,
  finishedBeforeKill: 0,
  original: 0,
  complete: 0,
  prefix: 0,
  broken: 0,
  unfinished: 0,
};

export interface KillFigures extends KillStateCounts {
  elfFiles: number;
  treeBytes: number;
  patchedFiles: number;
  fullRunSeconds: number;
  durableRunSeconds: number;
  loadChecks: number;
  secondApplyFailures: number;
  checkFailures: number;
}

export interface KillProblem {
  readonly round: number;
  readonly delayMs: number;
  readonly problem: string;
}

interface Reference {
  readonly files: readonly ElfTreeFile[];
  /** rel → the runpath apply gives it (patched files only). */
  readonly newRunpath: ReadonlyMap<string, string>;
  readonly originalHash: ReadonlyMap<string, string>;
  readonly patchedHash: ReadonlyMap<string, string>;
}

export interface CliRun {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

/** Runs the CLI; with `killAfterMs`, sends SIGKILL after that long unless it has finished. */
export function runCli(cli: string, args: readonly string[], killAfterMs?: number): Promise<CliRun> {
  const started = performance.now();
  const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const timer = killAfterMs === undefined ? null : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (timer !== null) clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: performance.now() - started });
    });
  });
}

const applyArgs = (tree: string, durable = false): string[] => [
  'apply',
  tree,
  '--cuda-compat',
  COMPAT_DIR,
  ...(durable ? ['--durable'] : []),
];

export async function hashes(root: string, files: readonly ElfTreeFile[]): Promise<Map<string, string>> {
  const hashed = await mapLimited(files, 8, async (f) => [f.rel, await sha256File(join(root, f.rel))] as const);
  return new Map(hashed);
}

/** Whether the loader maps the file and finds its dependencies (x86_64 natively, aarch64 under qemu). */
async function loads(path: string, file: ElfTreeFile): Promise<boolean | null> {
  if (!isBuildArch(file.arch)) return null;
  try {
    await ldList(path, file.arch, file.arch === 'aarch64' ? { libraryPath: dirname(path) } : {});
    return true;
  } catch {
    return false;
  }
}

export async function restore(pristine: string, work: string): Promise<void> {
  await rm(work, { recursive: true, force: true });
  await cp(pristine, work, { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
}

/** The plan apply makes for a file: its runpath set to the hooks' value, tag kind kept. */
const planFor = (path: string, runpath: string): Promise<Plan> =>
  planFile(path, (editor) => editor.setRunpath(textToByteString(runpath), 'keep'));

/**
 * Every state a kill can leave the file in: the original with the first k writes of the plan, and with
 * write k+1 cut at each page boundary inside it; then all of them, cut to the plan's final size
 * (`complete`). Each with a description.
 */
export function killStateList(original: Uint8Array, plan: Plan): { bytes: Uint8Array; what: string }[] {
  const states: { bytes: Uint8Array; what: string }[] = [];
  const laid = (base: Uint8Array, write: PlannedWrite, length: number): Uint8Array => {
    const out = new Uint8Array(Math.max(base.length, write.offset + length));
    out.set(base);
    out.set(write.bytes.subarray(0, length), write.offset);
    return out;
  };
  let bytes = original;
  states.push({ bytes, what: 'original' });
  plan.writes.forEach((write, k) => {
    for (let cut = (Math.floor(write.offset / PAGE) + 1) * PAGE; cut < write.offset + write.bytes.length; cut += PAGE) {
      states.push({
        bytes: laid(bytes, write, cut - write.offset),
        what: `${k} of ${plan.writes.length} writes, and write ${k + 1} (${write.what}) cut at 0x${cut.toString(16)}`,
      });
    }
    bytes = laid(bytes, write, write.bytes.length);
    states.push({
      bytes,
      what: `${k + 1} of ${plan.writes.length} writes${k + 1 === plan.writes.length ? ', the file not yet cut to its final size' : ''}`,
    });
  });
  // After the last write the file is cut to its final size (a no-op unless a write reached past it).
  states.push({ bytes: bytes.subarray(0, plan.newSize), what: 'complete' });
  return states;
}

/** The hashes of every state a kill can leave the file in (killStateList), each to its description. */
function killStates(original: Uint8Array, plan: Plan): Map<string, string> {
  return new Map(killStateList(original, plan).map(({ bytes, what }) => [createHash('sha256').update(bytes).digest('hex'), what]));
}

async function reference(
  config: KillCampaignConfig,
  pristine: string,
  work: string,
): Promise<{ reference: Reference; seconds: number; durableSeconds: number; problems: string[] }> {
  const files = await assembleElfTree(pristine, config.sources, config.maxFileBytes);
  await restore(pristine, work);
  const run = await runCli(config.cli, [...applyArgs(work), '--json']);
  if (run.code !== 0) throw new Error(`the uninterrupted apply exited ${String(run.code ?? run.signal)}:\n${run.stderr.slice(0, 4000)}`);
  const report = parseReport(run.stdout);
  const newRunpath = new Map<string, string>();
  for (const file of report.files) {
    if (file.status === 'patched' && file.newRunpath !== undefined) newRunpath.set(file.path.slice(work.length + 1), file.newRunpath);
  }
  const problems: string[] = [];
  const check = await runCli(config.cli, ['check', work, '--cuda-compat', COMPAT_DIR]);
  if (check.code !== 0) problems.push(`check after the uninterrupted apply exited ${String(check.code)}:\n${check.stdout.slice(0, 2000)}`);
  // Every patched file loads wherever its original did: then so does every byte-identical copy of it.
  const patched = files.filter((f) => newRunpath.has(f.rel));
  await mapLimited(patched, 4, async (file) => {
    if ((await loads(join(pristine, file.rel), file)) === true && (await loads(join(work, file.rel), file)) === false) {
      problems.push(`${file.rel}: the original loads, the patched file does not`);
    }
  });
  const patchedHash = await hashes(work, files);
  // A durable run writes the same bytes; it only waits for the disk between phases.
  let durableSeconds = 0;
  if (config.durableEvery > 0) {
    await restore(pristine, work);
    const durable = await runCli(config.cli, applyArgs(work, true));
    durableSeconds = durable.ms / 1000;
    if (durable.code !== 0) problems.push(`the uninterrupted durable apply exited ${String(durable.code ?? durable.signal)}`);
    const durableHash = await hashes(work, files);
    const different = files.filter((f) => durableHash.get(f.rel) !== patchedHash.get(f.rel));
    if (different.length > 0) problems.push(`--durable writes other bytes: ${different.map((f) => f.rel).join(', ')}`);
  }
  return {
    reference: { files, newRunpath, originalHash: await hashes(pristine, files), patchedHash },
    seconds: run.ms / 1000,
    durableSeconds,
    problems,
  };
}

interface RoundResult {
  readonly killed: boolean;
  readonly original: number;
  readonly complete: number;
  readonly prefix: number;
  readonly loadChecks: number;
  readonly problems: string[];
}

interface RoundPlan {
  readonly delayMs: number;
  readonly durable: boolean;
}

async function round(
  config: KillCampaignConfig,
  ref: Reference,
  pristine: string,
  work: string,
  plan: RoundPlan,
  r: Rng,
): Promise<RoundResult> {
  await restore(pristine, work);
  const killedRun = await runCli(config.cli, applyArgs(work, plan.durable), plan.delayMs);
  const killed = killedRun.signal === 'SIGKILL';
  const problems: string[] = [];
  if (!killed && killedRun.code !== 0)
    problems.push(`apply (not killed) exited ${String(killedRun.code)}: ${killedRun.stderr.slice(0, 2000)}`);
  const now = await hashes(work, ref.files);
  let original = 0;
  let complete = 0;
  let loadChecks = 0;
  const prefixes: ElfTreeFile[] = [];
  const completeFiles: ElfTreeFile[] = [];
  for (const file of ref.files) {
    const hash = now.get(file.rel);
    const runpath = ref.newRunpath.get(file.rel);
    if (hash === ref.originalHash.get(file.rel)) original++;
    else if (runpath === undefined) problems.push(`${file.rel}: apply leaves this file alone, yet it changed`);
    else if (hash === ref.patchedHash.get(file.rel)) {
      complete++;
      completeFiles.push(file);
    } else prefixes.push(file);
  }
  for (const file of prefixes) {
    const states = killStates(
      new Uint8Array(await readFile(join(pristine, file.rel))),
      await planFor(join(pristine, file.rel), ref.newRunpath.get(file.rel) ?? ''),
    );
    const state = states.get(now.get(file.rel) ?? '');
    if (state === undefined) problems.push(`${file.rel}: neither the original, nor patched, nor any prefix of its plan's writes`);
    else if (state === 'complete') problems.push(`${file.rel}: the campaign's plan for it is not the one apply carried out`);
    else config.log?.(`  ${file.rel}: ${state}`);
  }
  const toLoad = [...prefixes, ...Array.from({ length: Math.min(config.loadSample, completeFiles.length) }, () => r.pick(completeFiles))];
  for (const file of toLoad) {
    const before = await loads(join(pristine, file.rel), file);
    if (before === null) continue;
    loadChecks++;
    if (before && !(await loads(join(work, file.rel), file))) problems.push(`${file.rel}: does not load after the kill; the original does`);
  }

  // A second apply finishes the job.
  const second = await runCli(config.cli, applyArgs(work));
  if (second.code !== 0) problems.push(`the second apply exited ${String(second.code ?? second.signal)}: ${second.stderr.slice(0, 2000)}`);
  const check = await runCli(config.cli, ['check', work, '--cuda-compat', COMPAT_DIR]);
  if (check.code !== 0) problems.push(`check after the second apply exited ${String(check.code)}: ${check.stdout.slice(0, 2000)}`);
  const after = await hashes(work, ref.files);
  for (const file of ref.files) {
    const expected = ref.newRunpath.has(file.rel) ? ref.patchedHash.get(file.rel) : ref.originalHash.get(file.rel);
    if (prefixes.includes(file)) continue;
    if (after.get(file.rel) !== expected) problems.push(`${file.rel}: after the second apply, not what an uninterrupted run gives`);
  }
  for (const file of prefixes) {
    const facts = await readDynamic(join(work, file.rel));
    const runpath = facts === null ? null : effectiveRunpath(facts);
    if (runpath !== ref.newRunpath.get(file.rel)) problems.push(`${file.rel}: after the second apply the runpath is ${String(runpath)}`);
    const before = await loads(join(pristine, file.rel), file);
    if (before === true && !(await loads(join(work, file.rel), file))) problems.push(`${file.rel}: does not load after the second apply`);
  }
  return { killed, original, complete, prefix: prefixes.length, loadChecks, problems };
}

export async function runKillCampaign(config: KillCampaignConfig): Promise<{ figures: KillFigures; problems: KillProblem[] }> {
  const pristine = join(config.scratch, 'pristine');
  const work = join(config.scratch, 'work');
  await mkdir(config.scratch, { recursive: true });
  const { reference: ref, seconds, durableSeconds, problems: referenceProblems } = await reference(config, pristine, work);
  const figures: KillFigures = {
    elfFiles: ref.files.length,
    treeBytes: ref.files.reduce((sum, f) => sum + f.size, 0),
    patchedFiles: ref.newRunpath.size,
    fullRunSeconds: seconds,
    durableRunSeconds: durableSeconds,
    ...NO_KILLS,
    loadChecks: 0,
    secondApplyFailures: 0,
    checkFailures: 0,
  };
  const problems: KillProblem[] = referenceProblems.map((problem) => ({ round: 0, delayMs: 0, problem }));
  config.log?.(
    `tree: ${figures.elfFiles} ELF files, ${(figures.treeBytes / 2 ** 20).toFixed(0)} MiB, ${figures.patchedFiles} patched by apply in ${seconds.toFixed(1)} s (--durable: ${durableSeconds.toFixed(1)} s)`,
  );
  const r = rng(config.seed);
  // Runs that finish before the kill do not count; give up long before an endless loop.
  for (let n = 1; figures.kills < config.kills && n <= config.kills * 4; n++) {
    const durable = config.durableEvery > 0 && n % config.durableEvery === 0;
    const delayMs = r.below(Math.max(1, Math.round((durable ? durableSeconds : seconds) * 1000)));
    const result = await round(config, ref, pristine, work, { delayMs, durable }, r);
    if (result.killed) {
      figures.kills++;
      if (durable) figures.durableKills++;
    } else {
      figures.finishedBeforeKill++;
    }
    figures.original += result.original;
    figures.complete += result.complete;
    figures.prefix += result.prefix;
    figures.loadChecks += result.loadChecks;
    figures.broken += result.problems.filter((p) => p.includes('neither the original') || p.includes('does not load')).length;
    figures.unfinished += result.problems.filter((p) => p.includes(': after the second apply')).length;
    figures.secondApplyFailures += result.problems.some((p) => p.startsWith('the second apply')) ? 1 : 0;
    figures.checkFailures += result.problems.some((p) => p.startsWith('check after')) ? 1 : 0;
    problems.push(...result.problems.map((problem) => ({ round: n, delayMs, problem })));
    config.log?.(
      `round ${n}${durable ? ' (--durable)' : ''}: ${result.killed ? 'killed' : 'finished'} at ${delayMs} ms: ${result.original} original, ${result.complete} complete, ${result.prefix} prefix; ${result.problems.length} problems`,
    );
    for (const problem of result.problems) config.log?.(`  PROBLEM ${problem}`);
  }
  return { figures, problems };
}
