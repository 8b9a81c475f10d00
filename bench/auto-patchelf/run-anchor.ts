// The anchor side alone: Nixpkgs' auto-patchelf.py on each case's tree, with patchelf 0.18 and then
// 0.14.3 (each on a fresh copy, REPEAT times), timed, and what it did per file read back with readelf.
//
//   npx vite-node bench/auto-patchelf/run-anchor.ts [CASE...]     REPEAT=n (default 1)
//
// No CASE: every case but `closure` (the closure benchmark's 5 GB tree: name it). Needs the trees
// (bench/auto-patchelf/assemble.sh, run first thing) and the anchor script (anchor.ts says how to
// fetch it). Writes bench/.cache/auto-patchelf/anchor/<case>.json (0.14.3's run, whose copy stays in
// bench/.cache/auto-patchelf/work/anchor/<case> for the differential) and
// bench/results/<date>-<machine>-auto-patchelf-anchor[-CASE...].md.

import { mkdir } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { type Measurement, requireBenchTools } from '../lib/measure.js';
import { table, writeResults } from '../lib/results.js';
import { checkAnchorScript } from './anchor.js';
import { caseArguments, resultsName } from './arguments.js';
import { type AnchorResult, anchorOnCopy, type FileResult, recordedArgv, saveAnchorResult, summarize } from './anchor-result.js';
import { AP_CACHE, assemble, type AutoPatchelfCase, type PatchelfVersion, pickCases } from './cases.js';
import { elfFilesUnder, readElfFacts } from './read-back.js';

const REPEAT = Number(process.env.REPEAT ?? 1);
/** The last one's copy stays and its results are saved: Debian's patchelf, the one this machine has. */
const VERSIONS: readonly PatchelfVersion[] = ['0.18', '0.14.3'];
const say = (line: string): void => void process.stderr.write(`auto-patchelf anchor: ${line}\n`);

async function runCase(c: AutoPatchelfCase): Promise<{ result: AnchorResult; agree: string }> {
  const copy = join(AP_CACHE, 'work', 'anchor', c.name);
  await mkdir(join(copy, '..'), { recursive: true });
  const before = await readElfFacts(c.tree, await elfFilesUnder(c.tree, c.paths));
  const timings: AnchorResult['timings'][number][] = [];
  const outcomes: { patchelf: PatchelfVersion; exit: number; files: FileResult[] }[] = [];
  for (const patchelf of VERSIONS) {
    for (let i = 0; i < REPEAT; i++) {
      const { run, files } = await anchorOnCopy(c, copy, patchelf, before);
      say(
        `${c.name}, patchelf ${patchelf}: exit ${run.exit}, ${run.m.wallSeconds.toFixed(2)} s, ${(run.m.peakRssKiB / 1024).toFixed(0)} MiB`,
      );
      timings.push({ patchelf, m: run.m });
      if (i === REPEAT - 1) outcomes.push({ patchelf, exit: run.exit, files });
    }
  }
  const [first, last] = [outcomes[0], outcomes.at(-1)];
  if (first === undefined || last === undefined) throw new Error('no run');
  // Both patchelf versions must leave the same interpreter and runpath in every file.
  const differing = last.files.filter((file, i) => {
    const other = first.files[i];
    return other?.interpreter.after !== file.interpreter.after || other.runpath.after !== file.runpath.after;
  });
  const agree = differing.length === 0 ? 'yes' : `**no**: ${differing.map((file) => file.path).join(', ')}`;
  const result: AnchorResult = {
    case: c.name,
    argv: recordedArgv(c, copy),
    patchelf: last.patchelf,
    exit: last.exit,
    summary: summarize(last.files),
    timings,
    files: last.files,
  };
  say(`${c.name}: wrote ${await saveAnchorResult(result)}`);
  return { result, agree };
}

/** Wall seconds of each run, then CPU seconds (user + system, less sensitive to a busy machine). */
const seconds = (runs: readonly Measurement[]): string =>
  `${runs.map((m) => m.wallSeconds.toFixed(2)).join(', ')} s (CPU ${runs.map((m) => (m.cpuCores * m.wallSeconds).toFixed(2)).join(', ')} s)`;

function row(c: AutoPatchelfCase, { result, agree }: Awaited<ReturnType<typeof runCase>>): string[] {
  const s = result.summary;
  const skipped = Object.entries(s.skipped).map(([why, n]) => `${n} (${why})`);
  const timing = (patchelf: PatchelfVersion): string => {
    const runs = result.timings.filter((t) => t.patchelf === patchelf).map((t) => t.m);
    return `${seconds(runs)}, ${Math.max(...runs.map((m) => m.peakRssKiB / 1024)).toFixed(0)} MiB`;
  };
  return [
    c.name,
    String(s.files),
    `${s.patched} (${s.interpreterSet} / ${s.runpathSet})`,
    skipped.length === 0 ? '0' : skipped.join(', '),
    `${s.missing} / ${s.ignoredMissing}`,
    String(result.exit),
    ...VERSIONS.map(timing),
    agree,
  ];
}

async function main(): Promise<void> {
  await requireBenchTools(['/usr/bin/time', '/usr/bin/python3', 'readelf']);
  await checkAnchorScript();
  await assemble();
  const cases = await pickCases(caseArguments());
  const loadBefore = loadavg()[0]?.toFixed(2);
  const rows: string[][] = [];
  for (const c of cases) rows.push(row(c, await runCase(c)));
  const markdown = [
    "# autoPatchelf's anchor: Nixpkgs' auto-patchelf.py on each tree",
    '',
    `${availableParallelism()} CPUs; load average ${loadBefore} before, ${loadavg()[0]?.toFixed(2)} after; ${REPEAT} run(s) per patchelf version, each on a fresh copy.`,
    'Peak RSS: the largest process of the run (GNU time), the Python process or one patchelf.',
    '`npx vite-node bench/auto-patchelf/run-anchor.ts` (see its header); per-file results in `bench/.cache/auto-patchelf/anchor/`.',
    '',
    table(
      [
        'case',
        'ELF files',
        'patched (interpreter / runpath set)',
        'skipped',
        'missing / ignored',
        'exit',
        ...VERSIONS.map((v) => `patchelf ${v}: wall (CPU), peak RSS`),
        'same result with both',
      ],
      rows,
    ),
    '',
    ...cases.flatMap((c) => [`- **${c.name}**: ${c.description}.`]),
  ].join('\n');
  await writeResults(resultsName('anchor'), markdown);
}

await main();
