// The differential: on each case, Nixpkgs' auto-patchelf.py (patchelf 0.14.3) and `cuda-patchelf apply
// --auto-patchelf` on two fresh copies of the same tree with the same inputs, compared file by file:
// the interpreter, the directories the runpath names ($ORIGIN expanded), the libraries missing, and
// what the loader loads (compare.ts classifies each difference).
//
//   npx vite-node bench/auto-patchelf/differential.ts [CASE...] [--dist DIR] [--no-driver]
//
// No CASE: every case but `closure`. DIST: the build to run (default dist/, `npm run build`).
// --no-driver: ours without the driver hook, the resolver alone. Writes
// bench/results/<date>-<machine>-auto-patchelf-differential[-CASE...].md and, per case, every difference in
// bench/.cache/auto-patchelf/differential/<case>.json. Exit 1 when a difference is unexpected.

import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pLimit from 'p-limit';
import { requireBenchTools } from '../lib/measure.js';
import { table, writeResults } from '../lib/results.js';
import { checkAnchorScript } from './anchor.js';
import { caseArguments, distArgument, resultsName } from './arguments.js';
import { anchorOnCopy, readBack } from './anchor-result.js';
import { AP_CACHE, assemble, type AutoPatchelfCase, pickCases } from './cases.js';
import { compareFile, compareLoaded, type Difference, type DifferenceClass, type FileView } from './compare.js';
import { listLoaded, loadsFully } from './loader-list.js';
import { oursArgv, oursMissing, type OursOptions } from './ours.js';
import { elfFilesUnder, readElfFacts } from './read-back.js';
import { timedRunOnCopy } from './timed-run.js';

const options: OursOptions = { dist: distArgument(), driver: !process.argv.includes('--no-driver'), command: 'apply' };
const caseNames = caseArguments();
const say = (line: string): void => void process.stderr.write(`auto-patchelf differential: ${line}\n`);
const CLASSES: readonly DifferenceClass[] = ['determinism', 'origin-kept', 'driver', 'unexpected'];

interface CaseOutcome {
  readonly c: AutoPatchelfCase;
  readonly exits: { readonly anchor: number; readonly ours: number };
  readonly files: number;
  readonly listed: number;
  readonly loadWithAnchor: number;
  readonly loadWithOurs: number;
  readonly differences: readonly Difference[];
}

async function runCase(c: AutoPatchelfCase): Promise<CaseOutcome> {
  const context = { anchorCopy: join(AP_CACHE, 'work', 'anchor', c.name), oursCopy: join(AP_CACHE, 'work', 'ours', c.name) };
  await mkdir(join(context.anchorCopy, '..'), { recursive: true });
  await mkdir(join(context.oursCopy, '..'), { recursive: true });
  const elfFiles = await elfFilesUnder(c.tree, c.paths);
  const before = await readElfFacts(c.tree, elfFiles);
  const anchor = await anchorOnCopy(c, context.anchorCopy, '0.14.3', before);
  say(`${c.name}: anchor exit ${anchor.run.exit}, ${anchor.run.m.wallSeconds.toFixed(2)} s`);
  const ours = await timedRunOnCopy(c.tree, context.oursCopy, await oursArgv(c, context.oursCopy, options), process.env);
  say(`${c.name}: ours exit ${ours.exit}, ${ours.m.wallSeconds.toFixed(2)} s`);
  if (ours.exit !== 0 && ours.exit !== 3) throw new Error(`${c.name}: apply exited with ${ours.exit}: ${ours.stderr}`);
  const missing = oursMissing(ours.stdout, context.oursCopy);
  const after = await readElfFacts(context.oursCopy, elfFiles);
  const oursFiles = new Map(
    [...after].map(([path, facts]): [string, FileView] => [
      path,
      { ...readBack(context.oursCopy, path, before.get(path), facts), missing: [], ignoredMissing: [], ...missing.get(path) },
    ]),
  );
  const limit = pLimit(2);
  const perFile = await Promise.all(
    anchor.files.map((file) =>
      limit(async () => {
        const theirs = oursFiles.get(file.path);
        if (theirs === undefined) throw new Error(`${file.path}: not read back from our copy`);
        const written = compareFile(file, theirs, context);
        const [a, o] = await Promise.all([
          listLoaded(join(context.anchorCopy, file.path), file.machine),
          listLoaded(join(context.oursCopy, file.path), file.machine),
        ]);
        if (a === null || o === null) return { differences: written, loads: null };
        return {
          differences: [...written, ...compareLoaded(file.path, a, o, context)],
          loads: { anchor: loadsFully(a), ours: loadsFully(o) },
        };
      }),
    ),
  );
  const differences = perFile.flatMap((f) => f.differences);
  const loads = perFile.flatMap((f) => (f.loads === null ? [] : [f.loads]));
  differences.sort((x, y) => (x.file < y.file ? -1 : x.file > y.file ? 1 : 0));
  await mkdir(join(AP_CACHE, 'differential'), { recursive: true });
  await writeFile(join(AP_CACHE, 'differential', `${c.name}.json`), `${JSON.stringify(differences, null, 2)}\n`);
  return {
    c,
    exits: { anchor: anchor.run.exit, ours: ours.exit },
    files: anchor.files.length,
    listed: loads.length,
    loadWithAnchor: loads.filter((l) => l.anchor).length,
    loadWithOurs: loads.filter((l) => l.ours).length,
    differences,
  };
}

/** A case's differences of one class, a few of them when they are expected. */
function details(outcome: CaseOutcome, cls: DifferenceClass): string[] {
  const found = outcome.differences.filter((d) => d.class === cls);
  if (found.length === 0) return [];
  const shown = cls === 'unexpected' ? found : found.slice(0, 10);
  return [
    `### ${outcome.c.name}: ${cls} (${found.length})`,
    '',
    ...shown.map((d) => `- \`${d.file}\` (${d.what}): ${d.detail}`),
    ...(shown.length < found.length ? [`- … ${found.length - shown.length} more in the case's JSON`] : []),
    '',
  ];
}

async function main(): Promise<void> {
  await requireBenchTools(['/usr/bin/time', '/usr/bin/python3', 'readelf', '/usr/bin/qemu-aarch64']);
  await checkAnchorScript();
  if (!existsSync(join(options.dist, 'cli', 'main.js'))) throw new Error(`${options.dist}/cli/main.js is missing: npm run build`);
  await assemble();
  const outcomes: CaseOutcome[] = [];
  for (const c of await pickCases(caseNames)) outcomes.push(await runCase(c));
  const count = (o: CaseOutcome, cls: DifferenceClass): string =>
    String(new Set(o.differences.filter((d) => d.class === cls).map((d) => d.file)).size);
  const markdown = [
    "# autoPatchelf: Nixpkgs' auto-patchelf.py against `cuda-patchelf apply --auto-patchelf`",
    '',
    `Ours: \`${options.dist}\`, the driver hook ${options.driver ? 'on' : 'off (--no-driver)'}. The anchor with patchelf 0.14.3.`,
    'Files with a difference, by class (a file may count in several); the loader columns count files',
    "whose every library the loader finds (x86_64: the host's ld.so; aarch64: qemu-aarch64 with the fixtures' sysroot).",
    '',
    table(
      ['case', 'ELF files', 'exit (anchor / ours)', ...CLASSES, 'listed by the loader', 'load: anchor / ours'],
      outcomes.map((o) => [
        o.c.name,
        String(o.files),
        `${o.exits.anchor} / ${o.exits.ours}`,
        ...CLASSES.map((cls) => count(o, cls)),
        String(o.listed),
        `${o.loadWithAnchor} / ${o.loadWithOurs}`,
      ]),
    ),
    '',
    ...outcomes.flatMap((o) => CLASSES.flatMap((cls) => details(o, cls))),
  ].join('\n');
  await writeResults(resultsName('differential'), markdown);
  process.exitCode = outcomes.some((o) => o.differences.some((d) => d.class === 'unexpected')) ? 1 : 0;
}

await main();
