// The autoPatchelf benchmark: time and peak RSS of the anchor and of ours, in the same run, each on
// fresh copies (copy time excluded), for the specification's targets:
// - the ~600 Debian x86_64 libraries (debian-600, debian-600-nix): ours >= 15x faster, RSS <= 1/2;
// - the CUDA packages (cuda, cuda-nix): >= 50x faster, RSS <= 1/4;
// - the whole CUDA fixup over the closure (closure): auto-patchelf.py then the Nixpkgs patchelf hook
//   sequence (bench/nixpkgs-sequence.sh: driver, then cuda_compat) against one `apply --auto-patchelf
//   --cuda-compat C --remove-stubs`: >= 50x.
// Ours also as `plan` (the index and the plans, nothing written), and Node's start alone, to say where
// the time goes.
//
//   npx vite-node bench/auto-patchelf/benchmark.ts [CASE...] [--dist DIR]     REPEAT=n (default 3)
//
// No CASE: debian-600, debian-600-nix, cuda, cuda-nix, closure. Writes
// bench/results/<date>-<machine>-auto-patchelf-benchmark[-CASE...].md.

import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { type Measurement, measure, medianSample, requireBenchTools, spread } from '../lib/measure.js';
import { ratio, table, writeResults } from '../lib/results.js';
import { anchorArgv, anchorEnv, checkAnchorScript } from './anchor.js';
import { caseArguments, distArgument, resultsName } from './arguments.js';
import { AP_CACHE, assemble, type AutoPatchelfCase, CUDA_COMPAT, PATCHELF_VERSIONS, pickCases } from './cases.js';
import { oursArgv, type OursOptions } from './ours.js';
import { timedRunOnCopy } from './timed-run.js';

const REPEAT = Number(process.env.REPEAT ?? 3);
const DEFAULT_CASES = ['debian-600', 'debian-600-nix', 'cuda', 'cuda-nix', 'closure'];
const dist = distArgument();
const caseNames = caseArguments();
const SEQUENCE = join(import.meta.dirname, '..', 'nixpkgs-sequence.sh');
const say = (line: string): void => void process.stderr.write(`auto-patchelf benchmark: ${line}\n`);

interface Contender {
  readonly name: string;
  readonly argv: (copy: string) => Promise<string[]>;
  readonly env: NodeJS.ProcessEnv;
  /** Exit codes that are results (a missing library), not failures. */
  readonly exits: readonly number[];
}

function contenders(c: AutoPatchelfCase): Contender[] {
  const anchors = PATCHELF_VERSIONS.map(
    (patchelf): Contender => ({
      name: `auto-patchelf.py${c.cudaFixup ? ' then the Nixpkgs sequence' : ''}, patchelf ${patchelf}`,
      // The sequence (sh's $0) finds patchelf on PATH, as the anchor does: the same version for both.
      argv: async (copy) =>
        c.cudaFixup ? ['sh', '-c', '"$@"; bash "$0" "$COPY" "$COMPAT"', SEQUENCE, ...anchorArgv(c, copy)] : anchorArgv(c, copy),
      env: { ...anchorEnv(c, patchelf), COMPAT: CUDA_COMPAT },
      exits: [0, 1],
    }),
  );
  const ours = (command: OursOptions['command']): Contender => ({
    name: `cuda-patchelf ${command} --auto-patchelf${c.cudaFixup ? ' --cuda-compat C --remove-stubs' : ''}${command === 'plan' ? ' (nothing written)' : ''}`,
    argv: (copy) => oursArgv(c, copy, { dist, driver: true, command }),
    env: process.env,
    exits: [0, 3],
  });
  return [...anchors, ours('apply'), ours('plan')];
}

interface Timed {
  readonly contender: Contender;
  readonly runs: readonly { readonly m: Measurement }[];
  readonly exit: number;
}

async function timeContender(c: AutoPatchelfCase, contender: Contender): Promise<Timed> {
  const copy = join(AP_CACHE, 'work', 'bench', c.name);
  await mkdir(join(copy, '..'), { recursive: true });
  const runs: { m: Measurement }[] = [];
  let exit = 0;
  for (let i = 0; i < REPEAT; i++) {
    const run = await timedRunOnCopy(c.tree, copy, await contender.argv(copy), { ...contender.env, COPY: copy });
    if (!contender.exits.includes(run.exit)) throw new Error(`${c.name}, ${contender.name}: exit ${run.exit}: ${run.stderr.slice(-2000)}`);
    say(`${c.name}, ${contender.name}: ${run.m.wallSeconds.toFixed(2)} s, ${(run.m.peakRssKiB / 1024).toFixed(0)} MiB, exit ${run.exit}`);
    runs.push({ m: run.m });
    exit = run.exit;
  }
  return { contender, runs, exit };
}

function caseTable(c: AutoPatchelfCase, timed: readonly Timed[]): string {
  const base = timed[0];
  if (base === undefined) return '';
  const baseMedian = medianSample(base.runs).m;
  const rows = timed.map((t) => {
    const wall = spread(t.runs.map((r) => r.m.wallSeconds));
    const median = medianSample(t.runs).m;
    return [
      t.contender.name,
      `${wall.median.toFixed(2)} s`,
      `${wall.min.toFixed(2)} – ${wall.max.toFixed(2)} s`,
      `${(median.peakRssKiB / 1024).toFixed(0)} MiB`,
      median.cpuCores.toFixed(2),
      String(t.exit),
      ratio(baseMedian.wallSeconds, median.wallSeconds),
      ratio(baseMedian.peakRssKiB, median.peakRssKiB),
    ];
  });
  return [
    `## ${c.name}`,
    '',
    `${c.description}.`,
    '',
    table(
      ['contender', 'wall (median)', 'min – max', 'peak RSS', 'cores busy', 'exit', `faster than ${base.contender.name}`, 'less RSS'],
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
  const loadBefore = loadavg()[0]?.toFixed(2);
  const nodeStart: { m: Measurement }[] = [];
  for (let i = 0; i < REPEAT; i++) nodeStart.push({ m: await measure([process.execPath, join(dist, 'cli', 'main.js'), '--version']) });
  const sections: string[] = [];
  for (const c of await pickCases(caseNames.length === 0 ? DEFAULT_CASES : caseNames)) {
    const timed: Timed[] = [];
    for (const contender of contenders(c)) timed.push(await timeContender(c, contender));
    sections.push(caseTable(c, timed));
  }
  const markdown = [
    "# autoPatchelf: Nixpkgs' auto-patchelf.py against `cuda-patchelf apply --auto-patchelf`",
    '',
    `${availableParallelism()} CPUs; load average ${loadBefore} before, ${loadavg()[0]?.toFixed(2)} after. ${REPEAT} run(s) each, on fresh copies.`,
    `Ours: \`${dist}\`, the driver hook on. Node's start alone (\`main.js --version\`): ${medianSample(nodeStart).m.wallSeconds.toFixed(3)} s.`,
    'Peak RSS: the largest process of the run (GNU time): for the anchor the Python process or one patchelf, so it',
    'undercounts the anchor (both run at once).',
    '',
    ...sections,
  ].join('\n');
  await writeResults(resultsName('benchmark'), markdown);
}

await main();
