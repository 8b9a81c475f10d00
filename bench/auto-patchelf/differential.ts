// The differential: on each case, Nixpkgs' auto-patchelf.py (patchelf 0.14.3) and `cuda-patchelf apply
// --auto-patchelf` on two fresh copies of the same tree with the same inputs, compared file by file:
// the interpreter, the directories the runpath names ($ORIGIN expanded) and their order, the libraries
// missing, and what the loader opens with each result and which object asked for it first
// (compare.ts names the classes and classifies what was written; compare-loaded.ts, what is loaded).
//
//   npx vite-node bench/auto-patchelf/differential.ts [CASE...] [--dist DIR] [--no-driver]
//
// No CASE: every case but `closure`. DIST: the build to run (default dist/, `npm run build`).
// --no-driver: ours without the driver hook, the resolver alone. Writes
// bench/results/<date>-<machine>-auto-patchelf-differential[-CASE...].md and, per case, every difference in
// bench/.cache/auto-patchelf/differential/<case>.json. Exit 1 when a difference is unexpected.

import { existsSync } from 'node:fs';
import { mkdir, realpath, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pLimit from 'p-limit';
import { requireBenchTools } from '../lib/measure.js';
import { table, writeResults } from '../lib/results.js';
import { checkAnchorScript } from './anchor.js';
import { caseArguments, distArgument, resultsName } from './arguments.js';
import { anchorOnCopy, readBack } from './anchor-result.js';
import { AP_CACHE, assemble, type AutoPatchelfCase, bintoolsFacts, inCopy, pickCases } from './cases.js';
import { type CompareContext, compareFile, DIFFERENCE_CLASSES, type Difference, type DifferenceClass, type FileView } from './compare.js';
import { compareLoaded, type LoadedComparison, type Listings, type RequesterClass, where } from './compare-loaded.js';
import { listLoaded, loadsFully } from './loader-list.js';
import { oursArgv, type OursOptions, oursReports } from './ours.js';
import { elfFilesUnder, readElfFacts, runpathDirs } from './read-back.js';
import { timedRunOnCopy } from './timed-run.js';

const options: OursOptions = { dist: distArgument(), driver: !process.argv.includes('--no-driver'), command: 'apply' };
const caseNames = caseArguments();
const say = (line: string): void => void process.stderr.write(`auto-patchelf differential: ${line}\n`);

interface CaseOutcome {
  readonly c: AutoPatchelfCase;
  readonly exits: { readonly anchor: number; readonly ours: number };
  readonly files: number;
  readonly listed: number;
  readonly loadWithAnchor: number;
  readonly loadWithOurs: number;
  readonly differences: readonly Difference[];
}

/** One file: both sides' views, what they wrote differs in, and what the loader opens with each (null: not listed). */
interface FileComparison {
  readonly anchor: FileView;
  readonly ours: FileView;
  readonly written: readonly Difference[];
  readonly listings: Listings | null;
}

/**
 * The loader's differences of every file. A library another file of the tree asked for first takes
 * that file's class for it, so each file's are computed once, the one it depends on first.
 */
function loaderDifferences(files: ReadonlyMap<string, FileComparison>, context: CompareContext): Difference[] {
  const done = new Map<string, LoadedComparison | 'pending'>();
  const loadedOf = (path: string): LoadedComparison | null => {
    const known = done.get(path);
    if (known !== undefined) return known === 'pending' ? null : known;
    const file = files.get(path);
    if (file?.listings == null) return null;
    done.set(path, 'pending');
    const result = compareLoaded(file.anchor, file.ours, file.listings, requesterClass, context);
    done.set(path, result);
    return result;
  };
  const requesterClass: RequesterClass = (requester, name, paths) => {
    if (!requester.startsWith('<tree>/')) return null;
    const path = requester.slice('<tree>/'.length);
    const listings = files.get(path)?.listings;
    if (listings == null) return null;
    const same =
      where(listings.anchor.libraries.get(name), context.anchorCopy) === paths.anchor &&
      where(listings.ours.libraries.get(name), context.oursCopy) === paths.ours;
    return same ? (loadedOf(path)?.byName.get(name) ?? null) : null;
  };
  return [...files.keys()].flatMap((path) => loadedOf(path)?.differences ?? []);
}

async function runCase(c: AutoPatchelfCase): Promise<CaseOutcome> {
  // The copies by their real paths: what each side wrote is compared as real paths, masked `<tree>/...`
  // inside a copy, which a bench/.cache reached through a symbolic link would defeat.
  await mkdir(join(AP_CACHE, 'work', 'anchor'), { recursive: true });
  await mkdir(join(AP_CACHE, 'work', 'ours'), { recursive: true });
  const work = await realpath(join(AP_CACHE, 'work'));
  const copies = { anchorCopy: join(work, 'anchor', c.name), oursCopy: join(work, 'ours', c.name) };
  const elfFiles = await elfFilesUnder(c.tree, c.paths);
  const before = await readElfFacts(c.tree, elfFiles);
  const anchor = await anchorOnCopy(c, copies.anchorCopy, '0.14.3', before);
  say(`${c.name}: anchor exit ${anchor.run.exit}, ${anchor.run.m.wallSeconds.toFixed(2)} s`);
  const ours = await timedRunOnCopy(c.tree, copies.oursCopy, await oursArgv(c, copies.oursCopy, options), process.env);
  say(`${c.name}: ours exit ${ours.exit}, ${ours.m.wallSeconds.toFixed(2)} s`);
  if (ours.exit !== 0 && ours.exit !== 3) throw new Error(`${c.name}: apply exited with ${ours.exit}: ${ours.stderr}`);
  const reports = oursReports(ours.stdout, copies.oursCopy);
  const asWritten = (dirs: readonly string[]): string[] =>
    runpathDirs(dirs.map((dir) => inCopy(copies.oursCopy, dir)).join(':') || null, copies.oursCopy, '.');
  const context: CompareContext = {
    ...copies,
    libc: { dir: await realpath((await bintoolsFacts(c.bintools)).libcDir), glibcOnly: reports.glibcOnly },
    runtimeDependencies: asWritten(c.runtimeDependencies),
    appendRpaths: asWritten(c.appendRpaths),
  };
  const after = await readElfFacts(copies.oursCopy, elfFiles);
  const oursViews = new Map(
    [...after].map(([path, facts]): [string, FileView] => [
      path,
      {
        ...readBack(copies.oursCopy, path, before.get(path), facts),
        found: [],
        missing: [],
        ignoredMissing: [],
        failed: null,
        listR: null,
        ...reports.files.get(path),
      },
    ]),
  );
  const limit = pLimit(2);
  const compared = await Promise.all(
    anchor.files.map((file) =>
      limit(async (): Promise<[string, FileComparison]> => {
        const theirs = oursViews.get(file.path);
        if (theirs === undefined) throw new Error(`${file.path}: not read back from our copy`);
        const anchorView = { ...file, failed: null, listR: null };
        const [written, a, o] = await Promise.all([
          compareFile(anchorView, theirs, context),
          listLoaded(join(copies.anchorCopy, file.path), file.machine),
          listLoaded(join(copies.oursCopy, file.path), file.machine),
        ]);
        return [
          file.path,
          { anchor: anchorView, ours: theirs, written, listings: a === null || o === null ? null : { anchor: a, ours: o } },
        ];
      }),
    ),
  );
  const files = new Map(compared);
  const differences = [...[...files.values()].flatMap((f) => f.written), ...loaderDifferences(files, context)];
  const listed = [...files.values()].flatMap((f) => (f.listings === null ? [] : [f.listings]));
  differences.sort((x, y) => (x.file < y.file ? -1 : x.file > y.file ? 1 : 0));
  await mkdir(join(AP_CACHE, 'differential'), { recursive: true });
  await writeFile(join(AP_CACHE, 'differential', `${c.name}.json`), `${JSON.stringify(differences, null, 2)}\n`);
  return {
    c,
    exits: { anchor: anchor.run.exit, ours: ours.exit },
    files: anchor.files.length,
    listed: listed.length,
    loadWithAnchor: listed.filter((l) => loadsFully(l.anchor)).length,
    loadWithOurs: listed.filter((l) => loadsFully(l.ours)).length,
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
      ['case', 'ELF files', 'exit (anchor / ours)', ...DIFFERENCE_CLASSES, 'listed by the loader', 'load: anchor / ours'],
      outcomes.map((o) => [
        o.c.name,
        String(o.files),
        `${o.exits.anchor} / ${o.exits.ours}`,
        ...DIFFERENCE_CLASSES.map((cls) => count(o, cls)),
        String(o.listed),
        `${o.loadWithAnchor} / ${o.loadWithOurs}`,
      ]),
    ),
    '',
    ...outcomes.flatMap((o) => DIFFERENCE_CLASSES.flatMap((cls) => details(o, cls))),
  ].join('\n');
  await writeResults(resultsName('differential'), markdown);
  process.exitCode = outcomes.some((o) => o.differences.some((d) => d.class === 'unexpected')) ? 1 : 0;
}

await main();
