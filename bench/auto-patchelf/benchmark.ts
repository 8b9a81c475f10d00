// The autoPatchelf benchmark: time and peak RSS of the anchor and of ours, in the same run, each on
// fresh copies (copy time excluded), for the specification's targets:
// - the ~600 Debian x86_64 libraries (debian-600, debian-600-nix): ours >= 15x faster, RSS <= 1/2;
// - the CUDA packages (cuda, cuda-nix): >= 50x faster, RSS <= 1/4;
// - the whole CUDA fixup over the closure (closure): auto-patchelf.py then the Nixpkgs patchelf hook
//   sequence (bench/nixpkgs-sequence.sh: driver, then cuda_compat) against one `apply --auto-patchelf
//   --cuda-compat C --remove-stubs`: >= 50x.
// The anchor with patchelf 0.18 (PATCHELF=0.14.3 for the other one assemble.sh builds). Ours also as
// `plan` (the index and the plans, nothing written), `plan` without the resolver (the same walk and
// plans, no index), and Node's start alone, to say where the time goes. The contenders run in turn,
// round after round (A B C D, A B C D, ...), each on a fresh copy (the copy not timed), so that a
// ratio is taken between runs of the same round: the machine is shared and its load drifts.
//
//   npx vite-node bench/auto-patchelf/benchmark.ts [CASE...] [--dist DIR]     REPEAT=n (default 3)
//
// No CASE: debian-600, debian-600-nix, cuda, cuda-nix, cuda-nix-fixup, closure. Writes
// bench/results/<date>-<machine>-auto-patchelf-benchmark[-CASE...].md.

import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { type Measurement, measure, requireBenchTools, spread } from '../lib/measure.js';
import { table, writeResults } from '../lib/results.js';
import { anchorArgv, anchorEnv, checkAnchorScript } from './anchor.js';
import { caseArguments, distArgument, resultsName } from './arguments.js';
import { AP_CACHE, assemble, type AutoPatchelfCase, CUDA_COMPAT, PATCHELF_VERSIONS, type PatchelfVersion, pickCases } from './cases.js';
import { oursArgv, type OursOptions } from './ours.js';
import { timedRunOnCopy } from './timed-run.js';

const REPEAT = Number(process.env.REPEAT ?? 3);
const ANCHOR_PATCHELF = (process.env.PATCHELF ?? '0.18') as PatchelfVersion;
const DEFAULT_CASES = ['debian-600', 'debian-600-nix', 'cuda', 'cuda-nix', 'cuda-nix-fixup', 'closure'];
const dist = distArgument();
const caseNames = caseArguments();
const SEQUENCE = join(import.meta.dirname, '..', 'nixpkgs-sequence.sh');
const say = (line: string): void => void process.stderr.write(`auto-patchelf benchmark: ${line}\n`);
const load = (): string => (loadavg()[0] ?? 0).toFixed(2);

interface Contender {
  readonly name: string;
  readonly argv: (copy: string) => Promise<string[]>;
  readonly env: NodeJS.ProcessEnv;
  /** Exit codes that are results (a missing library), not failures. */
  readonly exits: readonly number[];
}

function contenders(c: AutoPatchelfCase): Contender[] {
  if (!PATCHELF_VERSIONS.includes(ANCHOR_PATCHELF)) throw new Error(`PATCHELF=${ANCHOR_PATCHELF}: one of ${PATCHELF_VERSIONS.join(', ')}`);
  const anchor: Contender = {
    name: `auto-patchelf.py${c.cudaFixup ? ' then the Nixpkgs sequence' : ''}, patchelf ${ANCHOR_PATCHELF}`,
    // The sequence (sh's $0) finds patchelf on PATH, as the anchor does: the same version for both.
    argv: async (copy) =>
      c.cudaFixup ? ['sh', '-c', '"$@"; bash "$0" "$COPY" "$COMPAT"', SEQUENCE, ...anchorArgv(c, copy)] : anchorArgv(c, copy),
    env: { ...anchorEnv(c, ANCHOR_PATCHELF), COMPAT: CUDA_COMPAT },
    exits: [0, 1],
  };
  const ours = (command: OursOptions['command'], resolver: boolean): Contender => ({
    name: [
      `cuda-patchelf ${command}`,
      resolver ? ' --auto-patchelf' : ' (driver hook alone, no index)',
      c.cudaFixup ? ' --cuda-compat C --remove-stubs' : '',
      command === 'plan' && resolver ? ' (nothing written)' : '',
    ].join(''),
    argv: (copy) => oursArgv(c, copy, { dist, driver: true, command, resolver }),
    env: process.env,
    exits: [0, 3],
  });
  // The whole fixup: the two sides only (the closure's 4.8 GB is copied before each run).
  return c.cudaFixup ? [anchor, ours('apply', true)] : [anchor, ours('apply', true), ours('plan', true), ours('plan', false)];
}

interface Run {
  readonly m: Measurement;
  readonly exit: number;
  /** The 1-minute load average when the run started. */
  readonly load: string;
}

async function runOnce(c: AutoPatchelfCase, contender: Contender): Promise<Run> {
  const copy = join(AP_CACHE, 'work', 'bench', c.name);
  await mkdir(join(copy, '..'), { recursive: true });
  const loadAtStart = load();
  const run = await timedRunOnCopy(c.tree, copy, await contender.argv(copy), { ...contender.env, COPY: copy });
  if (!contender.exits.includes(run.exit)) throw new Error(`${c.name}, ${contender.name}: exit ${run.exit}: ${run.stderr.slice(-2000)}`);
  say(
    `${c.name}, ${contender.name}: ${run.m.wallSeconds.toFixed(2)} s, ${(run.m.peakRssKiB / 1024).toFixed(0)} MiB, exit ${run.exit}, load ${loadAtStart}`,
  );
  return { m: run.m, exit: run.exit, load: loadAtStart };
}

const range = (values: readonly number[], digits: number, unit = ''): string => {
  const s = spread(values);
  return `${s.median.toFixed(digits)}${unit} (${s.min.toFixed(digits)} – ${s.max.toFixed(digits)})`;
};

function caseTable(c: AutoPatchelfCase, all: readonly Contender[], rounds: readonly (readonly Run[])[]): string {
  const rows = all.map((contender, i) => {
    const runs = rounds.map((round) => round[i] as Run);
    // The anchor's time and RSS over this contender's, round by round.
    const paired = (pick: (m: Measurement) => number): string =>
      i === 0
        ? '1×'
        : `${range(
            rounds.map((round) => pick((round[0] as Run).m) / pick((round[i] as Run).m)),
            1,
            '×',
          )}`;
    return [
      contender.name,
      range(
        runs.map((r) => r.m.wallSeconds),
        2,
        ' s',
      ),
      range(
        runs.map((r) => r.m.peakRssKiB / 1024),
        0,
        ' MiB',
      ),
      range(
        runs.map((r) => r.m.cpuCores),
        2,
      ),
      [...new Set(runs.map((r) => r.exit))].join(', '),
      paired((m) => m.wallSeconds),
      paired((m) => m.wallSeconds * m.cpuCores),
      paired((m) => m.peakRssKiB),
      runs.map((r) => r.load).join(', '),
    ];
  });
  return [
    `## ${c.name}`,
    '',
    `${c.description}.`,
    '',
    table(
      [
        'contender',
        'wall: median (min – max)',
        'peak RSS',
        'cores busy',
        'exit',
        "faster: the anchor's wall / this (same round)",
        "CPU time: the anchor's / this",
        "RSS: the anchor's / this",
        'load average at each start',
      ],
      rows,
    ),
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  await requireBenchTools(['/usr/bin/time', '/usr/bin/python3']);
  await checkAnchorScript();
  if (!existsSync(join(dist, 'cli', 'main.js'))) throw new Error(`${dist}/cli/main.js is missing: npm run build`);
  await assemble();
  const loadBefore = load();
  const nodeStart: Measurement[] = [];
  for (let i = 0; i < REPEAT; i++) nodeStart.push(await measure([process.execPath, join(dist, 'cli', 'main.js'), '--version']));
  const sections: string[] = [];
  for (const c of await pickCases(caseNames.length === 0 ? DEFAULT_CASES : caseNames)) {
    const all = contenders(c);
    const rounds: Run[][] = [];
    for (let i = 0; i < REPEAT; i++) {
      const round: Run[] = [];
      for (const contender of all) round.push(await runOnce(c, contender));
      rounds.push(round);
    }
    sections.push(caseTable(c, all, rounds));
  }
  const markdown = [
    "# autoPatchelf: Nixpkgs' auto-patchelf.py against `cuda-patchelf apply --auto-patchelf`",
    '',
    `${availableParallelism()} CPUs; load average ${loadBefore} before, ${load()} after. ${REPEAT} round(s), each contender once a round, on a fresh copy.`,
    `Ours: \`${dist}\`, the driver hook on. Node's start alone (\`main.js --version\`): ${range(
      nodeStart.map((m) => m.wallSeconds),
      3,
      ' s',
    )}.`,
    'Peak RSS: the largest process of the run (GNU time): for the anchor the Python process or one patchelf.',
    '',
    ...sections,
  ].join('\n');
  await writeResults(resultsName('benchmark'), markdown);
}

await main();
