// Kill campaign for set-interpreter: `cuda-patchelf set-interpreter LOADER FILE...` over copies of the
// compiled programs of both architectures (each beside its libraries), SIGKILLed at random moments.
// The interpreter is a copy of the real loader at a path longer than any program has room for, so
// every file takes the appended tier. After each kill every file must be its original, completely
// edited (byte-identical to an uninterrupted run), or its original with a prefix of its plan's writes
// (the last one possibly cut at a page) — and run, through the old loader or the new one. A second run
// must then finish the job: every file as an uninterrupted run leaves it, or, from a prefix, with the
// new path, the .interp header in step, the old path gone, and still running.

import { createHash } from 'node:crypto';
import { copyFile, cp, mkdir, readFile } from 'node:fs/promises';
import { basename, dirname, join, relative } from 'node:path';
import { textToByteString } from '../../src/elf/byte-string.js';
import type { Plan } from '../../src/plan/plan.js';
import { isBuildArch, type BuildArch } from '../helpers/arch.js';
import { fixtures, programVars, runOn, sysroot, type Fixture } from '../helpers/fixtures.js';
import { rng, type Rng } from '../helpers/fuzz-mutations.js';
import type { ElfTreeFile } from '../helpers/kill-tree.js';
import { readelfText } from '../helpers/readelf.js';
import { planFile } from '../helpers/fuzz-plan-file.js';
import { hashes, killStateList, NO_KILLS, restore, runCli, type KillStateCounts } from './kill-campaign.js';

const LOADER: Record<BuildArch, { readonly name: string; readonly old: string }> = {
  x86_64: { name: 'ld-linux-x86-64.so.2', old: '/lib64/ld-linux-x86-64.so.2' },
  aarch64: { name: 'ld-linux-aarch64.so.1', old: '/lib/ld-linux-aarch64.so.1' },
};

export interface InterpreterKillConfig {
  /** Runs that must end by SIGKILL. */
  readonly kills: number;
  readonly seed: number;
  readonly scratch: string;
  /** The built CLI (dist/cli/main.js). */
  readonly cli: string;
  /** Copies of each compiled program in the tree. */
  readonly copies: number;
  /** Completely edited files run again after each kill. */
  readonly runSample: number;
  /** Every this many runs, the killed run has --durable (0: never). */
  readonly durableEvery: number;
  readonly log?: (line: string) => void;
}

export interface InterpreterKillFigures extends KillStateCounts {
  programs: number;
  /** Programs run after a kill or a second run. */
  runs: number;
  secondRunFailures: number;
}

interface Program extends ElfTreeFile {
  readonly arch: BuildArch;
  readonly fixture: Fixture;
}

interface Group {
  readonly arch: BuildArch;
  readonly loader: string;
  readonly programs: readonly Program[];
  readonly originalHash: ReadonlyMap<string, string>;
  readonly editedHash: ReadonlyMap<string, string>;
  /** rel → the hashes of every state a kill can leave it in, each to its description. */
  readonly states: ReadonlyMap<string, ReadonlyMap<string, string>>;
  readonly seconds: number;
  readonly durableSeconds: number;
}

const args = (group: Pick<Group, 'loader' | 'programs'>, work: string, durable: boolean): string[] => [
  'set-interpreter',
  group.loader,
  ...group.programs.map((p) => join(work, p.rel)),
  ...(durable ? ['--durable'] : []),
];

async function runsAsBuilt(program: Program, root: string): Promise<boolean> {
  const result = await runOn(program.arch, join(root, program.rel), [], programVars(program.fixture.libraryPath));
  return result.code === 0 && result.stdout.trim() === program.fixture.expectedOutput;
}

/** What is wrong with a file after the second run, from a prefix: the new path, .interp in step, the old path gone. */
async function finishedProblems(group: Group, path: string): Promise<string[]> {
  const headers = await readelfText(['-l', '-S'], path);
  const problems: string[] = [];
  if (!headers.includes(`[Requesting program interpreter: ${group.loader}]`)) problems.push('readelf does not read the new path');
  const segment = /INTERP\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)/.exec(headers)?.slice(1);
  const section = /\.interp\s+PROGBITS\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)/.exec(headers)?.slice(1);
  const [vaddr, offset, size] = (section ?? []).map((hex) => Number.parseInt(hex, 16));
  const [p_offset, p_vaddr, p_filesz] = (segment ?? []).map((hex) => Number.parseInt(hex, 16));
  if (offset !== p_offset || vaddr !== p_vaddr || size !== p_filesz) problems.push('the .interp section header is not PT_INTERP');
  if ((await readFile(path)).includes(LOADER[group.arch].old)) problems.push('the old path is still in the file');
  return problems;
}

async function buildGroups(config: InterpreterKillConfig, pristine: string, work: string): Promise<Group[]> {
  const loaderDir = join(config.scratch, 'loaders', 'a', 'path', 'longer', 'than', 'any', 'program', 'has', 'room', 'for');
  await mkdir(loaderDir, { recursive: true });
  const groups: Group[] = [];
  for (const arch of ['x86_64', 'aarch64'] as const) {
    const loader = join(loaderDir, LOADER[arch].name);
    await copyFile(arch === 'x86_64' ? LOADER.x86_64.old : join(sysroot('aarch64'), 'lib', LOADER.aarch64.name), loader);
    const sources = fixtures(
      (f) =>
        f.origin === 'compiled' && f.arch === arch && (f.kind === 'pie' || f.kind === 'exec') && f.runnable && f.expectedOutput !== null,
    );
    const programs: Program[] = [];
    for (let copy = 0; copy < config.copies; copy++) {
      for (const [i, fixture] of sources.entries()) {
        if (!isBuildArch(fixture.arch)) continue;
        // The program's directory, bin/ and lib/ side by side as its $ORIGIN runpath expects.
        const dir = dirname(dirname(fixture.path));
        const into = join(pristine, arch, `${copy}-${i}`, basename(dir));
        await cp(dir, into, { recursive: true });
        const file = join(into, relative(dir, fixture.path));
        const rel = relative(pristine, file);
        programs.push({ rel, arch, size: (await readFile(file)).length, fixture });
      }
    }
    const states = new Map<string, Map<string, string>>();
    for (const program of programs) {
      const path = join(pristine, program.rel);
      const plan: Plan = await planFile(path, (editor) => editor.setInterpreter(textToByteString(loader)));
      const list = killStateList(new Uint8Array(await readFile(path)), plan);
      states.set(program.rel, new Map(list.map(({ bytes, what }) => [createHash('sha256').update(bytes).digest('hex'), what])));
    }
    const partial = { arch, loader, programs, states };
    await restore(pristine, work);
    const run = await runCli(config.cli, args(partial, work, false));
    if (run.code !== 0)
      throw new Error(`the uninterrupted set-interpreter exited ${String(run.code ?? run.signal)}:\n${run.stderr.slice(0, 4000)}`);
    const editedHash = await hashes(work, programs);
    await restore(pristine, work);
    const durable = await runCli(config.cli, args(partial, work, true));
    if (durable.code !== 0) throw new Error(`the uninterrupted durable set-interpreter exited ${String(durable.code ?? durable.signal)}`);
    groups.push({
      ...partial,
      originalHash: await hashes(pristine, programs),
      editedHash,
      seconds: run.ms / 1000,
      durableSeconds: durable.ms / 1000,
    });
  }
  return groups;
}

async function round(
  config: InterpreterKillConfig,
  group: Group,
  dirs: { pristine: string; work: string },
  kill: { delayMs: number; durable: boolean },
  r: Rng,
  figures: InterpreterKillFigures,
): Promise<{ killed: boolean; problems: string[] }> {
  const { pristine, work } = dirs;
  await restore(pristine, work);
  const killedRun = await runCli(config.cli, args(group, work, kill.durable), kill.delayMs);
  const killed = killedRun.signal === 'SIGKILL';
  const problems: string[] = [];
  if (!killed && killedRun.code !== 0)
    problems.push(`set-interpreter (not killed) exited ${String(killedRun.code)}: ${killedRun.stderr.slice(0, 2000)}`);
  const now = await hashes(work, group.programs);
  const prefixes: Program[] = [];
  const complete: Program[] = [];
  for (const program of group.programs) {
    const hash = now.get(program.rel) ?? '';
    if (hash === group.originalHash.get(program.rel)) figures.original++;
    else if (hash === group.editedHash.get(program.rel)) complete.push(program);
    else {
      const state = group.states.get(program.rel)?.get(hash);
      if (state === undefined) {
        figures.broken++;
        problems.push(`${program.rel}: neither the original, nor edited, nor any prefix of its plan's writes`);
      } else {
        prefixes.push(program);
        config.log?.(`  ${program.rel}: ${state}`);
      }
    }
  }
  figures.complete += complete.length;
  figures.prefix += prefixes.length;
  const sample = Array.from({ length: Math.min(config.runSample, complete.length) }, () => r.pick(complete));
  for (const program of [...prefixes, ...sample]) {
    figures.runs++;
    if (!(await runsAsBuilt(program, work))) {
      figures.broken++;
      problems.push(`${program.rel}: does not run after the kill`);
    }
  }
  const second = await runCli(config.cli, args(group, work, false));
  if (second.code !== 0) {
    figures.secondRunFailures++;
    problems.push(`the second run exited ${String(second.code ?? second.signal)}: ${second.stderr.slice(0, 2000)}`);
  }
  const after = await hashes(work, group.programs);
  for (const program of group.programs) {
    const unfinished = prefixes.includes(program)
      ? await finishedProblems(group, join(work, program.rel))
      : after.get(program.rel) === group.editedHash.get(program.rel)
        ? []
        : ['not what an uninterrupted run gives'];
    if (prefixes.includes(program)) {
      figures.runs++;
      if (!(await runsAsBuilt(program, work))) unfinished.push('does not run');
    }
    figures.unfinished += unfinished.length > 0 ? 1 : 0;
    problems.push(...unfinished.map((problem) => `${program.rel}: after the second run, ${problem}`));
  }
  return { killed, problems };
}

export async function runInterpreterKillCampaign(
  config: InterpreterKillConfig,
): Promise<{ figures: InterpreterKillFigures; problems: { round: number; delayMs: number; problem: string }[] }> {
  const pristine = join(config.scratch, 'pristine');
  const work = join(config.scratch, 'work');
  await mkdir(pristine, { recursive: true });
  const groups = await buildGroups(config, pristine, work);
  const figures: InterpreterKillFigures = {
    programs: groups.reduce((sum, g) => sum + g.programs.length, 0),
    ...NO_KILLS,
    runs: 0,
    secondRunFailures: 0,
  };
  for (const g of groups)
    config.log?.(
      `${g.arch}: ${g.programs.length} programs, set-interpreter in ${g.seconds.toFixed(1)} s ` +
        `(--durable: ${g.durableSeconds.toFixed(1)} s)`,
    );
  const problems: { round: number; delayMs: number; problem: string }[] = [];
  const r = rng(config.seed);
  for (let n = 1; figures.kills < config.kills && n <= config.kills * 4; n++) {
    const group = groups[n % groups.length] as Group;
    const durable = config.durableEvery > 0 && Math.ceil(n / groups.length) % config.durableEvery === 0;
    const delayMs = r.below(Math.max(1, Math.round((durable ? group.durableSeconds : group.seconds) * 1000)));
    const result = await round(config, group, { pristine, work }, { delayMs, durable }, r, figures);
    if (result.killed) {
      figures.kills++;
      if (durable) figures.durableKills++;
    } else figures.finishedBeforeKill++;
    problems.push(...result.problems.map((problem) => ({ round: n, delayMs, problem })));
    config.log?.(
      `round ${n} (${group.arch}${durable ? ', --durable' : ''}): ${result.killed ? 'killed' : 'finished'} at ${delayMs} ms; ` +
        `${result.problems.length} problems`,
    );
  }
  return { figures, problems };
}
