// `apply --cuda-compat C --remove-stubs` over a tree shaped like a real CUDA package output (x86_64 and
// aarch64, real CUDA 11.8 / driver 535 / Debian libraries, compiled programs, symlinks, a hard link, an
// archive, an object, a static executable, text files): every dynamic ELF file gets C/compat and the driver
// directory first and loses its stubs entries, everything else stays byte-identical, the counts are exact,
// the programs still run and the libraries still load; check, plan, --json, a corrupt file and --jobs agree.

import { appendFile, copyFile, mkdir, open, readlink, rm, stat, symlink } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixture, ldList, requireTool, runProgram } from './helpers/fixtures.js';
import { assertCliBuilt, runCli, stderrLines, type CliResult } from './helpers/run-cli.js';
import {
  cudaTreeIn,
  dynamicEntries,
  expectedPatched,
  expectedSkips,
  STUBS_ENTRY,
  type CudaTree,
  type TreeEntry,
} from './helpers/tree-cuda.js';
import {
  fullPoolHere,
  parseCheck,
  parsePlan,
  parseReport,
  parseSummaryLine,
  type ReportFile,
  type TreeReport,
} from './helpers/tree-report.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { contentDifferences, copiesOfTree, dedupeRunpath, sha256File, snapshotTree, type TreeSnapshot } from './helpers/tree-tools.js';
import { effectiveRunpath, readDynamic, tagKind, type DynamicFacts, dynamicSegmentOffset } from './helpers/readelf.js';
import { useTempDir } from './helpers/use-temp-dir.js';
import { BUILD_ARCHES } from './helpers/arch.js';

const DRIVER = '/run/opengl-driver/lib';
const CLI_TIMEOUT = 120_000;

let work = '';
let compat = '';
let tree: CudaTree;
let pristineSnapshot: TreeSnapshot;
let pristineAfterDryRuns: TreeSnapshot;
const before = new Map<string, DynamicFacts>();
const after = new Map<string, DynamicFacts>();
let planRun: CliResult;
let checkBefore: CliResult;
let checkAfter: CliResult;
/** A copy of the pristine tree, what `apply` said over it, and the copy afterwards. */
interface AppliedCopy {
  readonly dir: string;
  readonly result: CliResult;
  readonly after: TreeSnapshot;
}
/** t1: --jobs 4 (threads from the first file) --json; t2: --jobs 1; t3: with a corrupt library added. */
let t1: AppliedCopy;
let t2: AppliedCopy;
let t3: AppliedCopy;
/** t1 before apply. */
let t1Before: TreeSnapshot;
let report: TreeReport;
const CORRUPT = 'x86_64/lib/libcorrupt.so.1';
let corruptSize = 0;
let corruptBefore = { sha256: '', mtimeNs: 0n };

const hooks = (): string[] => ['--cuda-compat', compat, '--remove-stubs'];

function fileOf(rep: TreeReport, root: string, rel: string): ReportFile {
  const found = rep.files.find((f) => f.path === join(root, rel));
  if (found === undefined) throw new Error(`${rel} is missing from the --json report`);
  return found;
}

/** What the runpath must be after the three hooks (default semantics), from the runpath before. */
function expectedRunpath(old: string | null): string {
  const kept = (old ?? '').split(':').filter((entry) => !entry.includes('/lib/stubs'));
  return dedupeRunpath([`${compat}/compat`, DRIVER, ...kept].join(':'));
}

function factsOf(map: Map<string, DynamicFacts>, rel: string): DynamicFacts {
  const facts = map.get(rel);
  if (facts === undefined) throw new Error(`no readelf facts for ${rel}`);
  return facts;
}

/** The name of each hard-link group the walk patched (per the report); the others are skipped. */
function patchedNames(): TreeEntry[] {
  return dynamicEntries(tree).filter((e) => e.hardLinkGroup === undefined || fileOf(report, t1.dir, e.rel).status === 'patched');
}

/** Where `ld.so --list` resolved a dependency ($ORIGIN expands to a path with `..` in it). */
function resolvedAs(listed: string, soname: string): string | null {
  const match = new RegExp(`^\\s*${soname.replace(/[.+]/g, '\\$&')} => (\\S+)`, 'm').exec(listed);
  return match?.[1] === undefined ? null : resolve(match[1]);
}

beforeAll(async () => {
  for (const tool of ['readelf', 'gcc', 'aarch64-linux-gnu-gcc', 'ar', 'aarch64-linux-gnu-ar', 'qemu-aarch64', 'cp']) requireTool(tool);
  assertCliBuilt();
  work = await makeTempDir('cuda-tree');
  ({ compat, tree } = await cudaTreeIn(work, { arches: BUILD_ARCHES, large: true }));
  pristineSnapshot = await snapshotTree(tree.root);
  for (const entry of dynamicEntries(tree)) {
    const facts = await readDynamic(join(tree.root, entry.rel));
    if (facts === null) throw new Error(`${entry.rel} was meant to be a dynamic ELF file but readelf finds no dynamic section`);
    before.set(entry.rel, facts);
  }

  planRun = await runCli(['plan', tree.root, ...hooks()], { timeoutMs: CLI_TIMEOUT });
  checkBefore = await runCli(['check', tree.root, ...hooks()], { timeoutMs: CLI_TIMEOUT });
  pristineAfterDryRuns = await snapshotTree(tree.root);

  const [dir1, dir2, dir3] = await copiesOfTree(tree.root, work, ['t1', 't2', 't3']);
  // A library cut off in the middle of its dynamic array: the reader must reject it, not guess.
  const source = join(tree.root, 'x86_64/lib/libnvToolsExt.so.1.0.0');
  const dynamicAt = await dynamicSegmentOffset(source);
  if (dynamicAt === null) throw new Error(`${source} has no PT_DYNAMIC`);
  await copyFile(source, join(dir3, CORRUPT));
  const handle = await open(join(dir3, CORRUPT), 'r+');
  corruptSize = dynamicAt + 24;
  await handle.truncate(corruptSize);
  await handle.close();
  corruptBefore = { sha256: await sha256File(join(dir3, CORRUPT)), mtimeNs: (await stat(join(dir3, CORRUPT), { bigint: true })).mtimeNs };

  t1Before = await snapshotTree(dir1);
  const apply1 = await runCli(['apply', dir1, ...hooks(), '--jobs', '4', '--threads-from-start', '--json'], { timeoutMs: CLI_TIMEOUT });
  const apply2 = await runCli(['apply', dir2, ...hooks(), '--jobs', '1'], { timeoutMs: CLI_TIMEOUT });
  const apply3 = await runCli(['apply', dir3, ...hooks()], { timeoutMs: CLI_TIMEOUT });
  checkAfter = await runCli(['check', dir1, ...hooks()], { timeoutMs: CLI_TIMEOUT });
  expect(apply1.stderr).toBe('');
  expect(apply1.code).toBe(0);
  report = parseReport(apply1.stdout);
  t1 = { dir: dir1, result: apply1, after: await snapshotTree(dir1) };
  t2 = { dir: dir2, result: apply2, after: await snapshotTree(dir2) };
  t3 = { dir: dir3, result: apply3, after: await snapshotTree(dir3) };
  for (const entry of dynamicEntries(tree)) {
    const facts = await readDynamic(join(t1.dir, entry.rel));
    if (facts === null) throw new Error(`${entry.rel} lost its dynamic section`);
    after.set(entry.rel, facts);
  }
}, 600_000);

afterAll(async () => {
  if (work !== '') await rm(work, { recursive: true, force: true });
});

describe('apply over a CUDA package output', () => {
  it('puts C/compat and then the driver directory first in every dynamic ELF file, without stubs entries', () => {
    expect(dynamicEntries(tree).length).toBeGreaterThanOrEqual(40);
    const wrong: string[] = [];
    for (const entry of dynamicEntries(tree)) {
      const old = factsOf(before, entry.rel);
      const now = factsOf(after, entry.rel);
      const want = expectedRunpath(effectiveRunpath(old));
      const got = effectiveRunpath(now);
      // The default keeps the tag kind; a file without one gets DT_RUNPATH.
      const wantKind = tagKind(old) === 'none' ? 'RUNPATH' : tagKind(old);
      if (got !== want || tagKind(now) !== wantKind) wrong.push(`${entry.rel}: ${tagKind(now)} "${got}", expected ${wantKind} "${want}"`);
      if (!(got ?? '').startsWith(`${compat}/compat:${DRIVER}`)) wrong.push(`${entry.rel}: does not start with compat then driver`);
      if ((got ?? '').includes('/lib/stubs')) wrong.push(`${entry.rel}: still has a stubs entry`);
      if (JSON.stringify(now.needed) !== JSON.stringify(old.needed)) wrong.push(`${entry.rel}: DT_NEEDED changed`);
      if (now.soname !== old.soname) wrong.push(`${entry.rel}: DT_SONAME changed`);
    }
    expect(wrong).toEqual([]);
    // The tree really exercised all three kinds of starting point and the stubs hook.
    const kinds = new Set(dynamicEntries(tree).map((e) => tagKind(factsOf(before, e.rel))));
    expect(kinds).toEqual(new Set(['RUNPATH', 'RPATH', 'none']));
    expect(dynamicEntries(tree).filter((e) => (effectiveRunpath(factsOf(before, e.rel)) ?? '').includes(STUBS_ENTRY))).toHaveLength(4);
  });

  it('leaves everything that is not a dynamic ELF file byte-identical, times included', async () => {
    const untouched = tree.entries.filter((e) => e.expect !== 'dynamic');
    expect(new Set(untouched.map((e) => e.expect))).toEqual(new Set(['symlink', 'not-elf', 'archive', 'relocatable', 'static']));
    const changed: string[] = [];
    for (const entry of untouched) {
      const a = t1Before.get(entry.rel);
      const b = t1.after.get(entry.rel);
      if (a === undefined || b === undefined) changed.push(`${entry.rel}: missing`);
      else if (a.type === 'file' && b.type === 'file') {
        if (a.sha256 !== b.sha256 || a.mtimeNs !== b.mtimeNs || a.mode !== b.mode) changed.push(`${entry.rel}: file changed`);
      } else if (a.type === 'symlink' && b.type === 'symlink') {
        if (a.target !== b.target || a.mtimeNs !== b.mtimeNs) changed.push(`${entry.rel}: symlink changed`);
      } else changed.push(`${entry.rel}: ${a.type} became ${b.type}`);
    }
    expect(changed).toEqual([]);
    // The absolute symlink was not followed out of the tree.
    expect(await sha256File(tree.outsideFile)).toBe(await sha256File(fixture('compiled/x86_64/libgreet').path));
    // Nothing appeared or disappeared.
    expect([...t1.after.keys()].sort()).toEqual([...t1Before.keys()].sort());
  });

  it('patches a hard-linked library once, and both names show the change', async () => {
    const groups = new Map<string, TreeEntry[]>();
    for (const entry of tree.entries)
      if (entry.hardLinkGroup !== undefined) groups.set(entry.hardLinkGroup, [...(groups.get(entry.hardLinkGroup) ?? []), entry]);
    expect(groups.size).toBe(2);
    for (const names of groups.values()) {
      expect(names).toHaveLength(2);
      const outcomes = names.map((e) => fileOf(report, t1.dir, e.rel));
      const patched = outcomes.filter((o) => o.status === 'patched');
      const skipped = outcomes.filter((o) => o.status === 'skipped');
      expect(patched).toHaveLength(1);
      expect(skipped).toHaveLength(1);
      expect(skipped[0]?.reason).toBe('hard-link');
      expect(skipped[0]?.detail).toBe(patched[0]?.path);
      expect(patched[0]?.otherLinks).toBe(1);
      const [first, second] = names.map((e) => t1.after.get(e.rel));
      if (first?.type !== 'file' || second?.type !== 'file') throw new Error('hard-link names are not files after apply');
      expect(first.ino).toBe(second.ino);
      expect(first.nlink).toBe(2);
      expect(first.sha256).toBe(second.sha256);
      for (const entry of names)
        expect(effectiveRunpath(factsOf(after, entry.rel))).toBe(expectedRunpath(effectiveRunpath(factsOf(before, entry.rel))));
    }
    expect(report.summary.patchedWithOtherLinks).toBe(2);
    expect(t2.result.stdout).toContain('note: 2 patched files have other hard links; the change shows through every link');
  });

  it('counts exactly: visited, patched per tier, skipped per reason', async () => {
    const summary = report.summary;
    expect(summary.visited).toBe(tree.entries.length);
    expect(summary.unchanged).toBe(0);
    expect(summary.failed).toBe(0);
    expect(summary.skipped).toEqual(expectedSkips(tree));
    expect(expectedSkips(tree)).toEqual({ symlink: 21, 'not-elf': 15, archive: 2, relocatable: 2, static: 2, 'hard-link': 2 });
    // The tier of each file follows from its size: appending grows the file, in place never does.
    const tiers: Record<string, number> = {};
    for (const entry of patchedNames()) {
      const a = t1Before.get(entry.rel);
      const b = t1.after.get(entry.rel);
      if (a?.type !== 'file' || b?.type !== 'file') throw new Error(`${entry.rel} is not a file`);
      const tier = b.size > a.size ? 'append' : b.size === a.size ? 'in-place' : 'shrunk';
      tiers[tier] = (tiers[tier] ?? 0) + 1;
      expect(fileOf(report, t1.dir, entry.rel).tier, entry.rel).toBe(tier);
    }
    expect(summary.patched).toEqual(tiers);
    expect(Object.values(summary.patched).reduce((x, y) => x + y, 0)).toBe(expectedPatched(tree));
    // The text summary of the --jobs 1 run says the same.
    expect(t2.result.code).toBe(0);
    const line = parseSummaryLine(t2.result.stdout);
    expect(line).toEqual({
      command: 'apply',
      visited: summary.visited,
      patched: expectedPatched(tree),
      tiers,
      wouldRefuse: 0,
      unchanged: 0,
      skipped: expectedSkips(tree),
      failed: 0,
      bytesWritten: summary.bytesWritten,
    });
  });

  it('--json reports every entry once, consistently with the files on disk', () => {
    expect(report.command).toBe('apply');
    expect(report.dryRun).toBe(false);
    expect(report.semantics).toBe('default');
    expect(report.hooks).toEqual(['driver', 'cuda-compat', 'remove-stubs']);
    const paths = report.files.map((f) => f.path);
    expect(paths).toEqual([...paths].sort());
    expect(new Set(paths)).toEqual(new Set(tree.entries.map((e) => join(t1.dir, e.rel))));
    expect(paths).toHaveLength(tree.entries.length);
    let bytes = 0;
    for (const file of report.files) {
      const rel = relative(t1.dir, file.path);
      const entry = tree.entries.find((e) => e.rel === rel);
      if (entry === undefined) throw new Error(`${rel} is not in the tree`);
      if (file.status === 'patched') {
        expect(entry.expect).toBe('dynamic');
        expect(file.oldRunpath, rel).toBe(effectiveRunpath(factsOf(before, rel)));
        expect(file.newRunpath, rel).toBe(effectiveRunpath(factsOf(after, rel)));
        const entries = file.entries ?? [];
        expect(entries.map((e) => e.dir).join(':'), rel).toBe(file.newRunpath);
        expect(entries.slice(0, 2), rel).toEqual([
          { dir: `${compat}/compat`, hook: 'cuda-compat' },
          { dir: DRIVER, hook: 'driver' },
        ]);
        expect(
          entries.slice(2).every((e) => e.hook === null),
          rel,
        ).toBe(true);
        expect(file.bytesWritten ?? 0, rel).toBeGreaterThan(0);
        bytes += file.bytesWritten ?? 0;
      } else {
        expect(file.status, rel).toBe('skipped');
        const reason = entry.expect === 'dynamic' ? 'hard-link' : entry.expect;
        expect(file.reason, rel).toBe(reason);
      }
    }
    expect(bytes).toBe(report.summary.bytesWritten);
  });

  it('programs still run (x86_64 natively, aarch64 under qemu) and load their libraries from the tree', async () => {
    const programs = tree.entries.filter((e) => e.program !== undefined);
    expect(programs.filter((e) => e.arch === 'x86_64')).toHaveLength(7);
    expect(programs.filter((e) => e.arch === 'aarch64')).toHaveLength(7);
    for (const entry of programs) {
      const program = entry.program;
      if (program === undefined || entry.arch === undefined) continue;
      const libraryPath = program.libraryDir === null ? null : join(t1.dir, program.libraryDir);
      const { stdout } = await runProgram(program.fixture, { path: join(t1.dir, entry.rel), libraryPath });
      expect(stdout.trim(), entry.rel).toBe(program.expectedOutput);
      const listed = await ldList(join(t1.dir, entry.rel), entry.arch, { libraryPath });
      expect(resolvedAs(listed, 'libgreet.so.1'), entry.rel).toBe(join(t1.dir, entry.arch, 'lib', 'libgreet.so.1'));
    }
    // The C++ program throws through the patched copies of libstdc++ and libgcc_s in lib/.
    for (const arch of BUILD_ARCHES) {
      const listed = await ldList(join(t1.dir, arch, 'bin/cxx-throw'), arch);
      expect(resolvedAs(listed, 'libstdc++.so.6')).toBe(join(t1.dir, arch, 'lib', 'libstdc++.so.6'));
      expect(resolvedAs(listed, 'libgcc_s.so.1')).toBe(join(t1.dir, arch, 'lib', 'libgcc_s.so.1'));
    }
  });

  it('libraries still load', async () => {
    const libraries = tree.entries.filter((e) => e.library === true);
    expect(libraries.length).toBeGreaterThanOrEqual(30);
    for (const entry of libraries) {
      if (entry.arch === undefined) continue;
      const listed = await ldList(join(t1.dir, entry.rel), entry.arch, { libraryPath: join(t1.dir, entry.arch, 'lib') });
      expect(listed.length, entry.rel).toBeGreaterThan(0);
    }
  });

  it('check exits 1 before apply, listing each file apply changes, and 0 after', () => {
    expect(checkBefore.stderr).toBe('');
    expect(checkBefore.code).toBe(1);
    const { files, last } = parseCheck(checkBefore.stdout);
    expect(last).toBe(`cuda-patchelf check: ${expectedPatched(tree)} files need patching`);
    const listed = files.map((f) => relative(tree.root, f.path)).sort();
    expect(listed).toEqual(
      patchedNames()
        .map((e) => e.rel)
        .sort(),
    );
    for (const line of files) {
      const rel = relative(tree.root, line.path);
      expect(line.old, rel).toBe(effectiveRunpath(factsOf(before, rel)));
      expect(line.new, rel).toBe(effectiveRunpath(factsOf(after, rel)));
    }
    expect(checkAfter.stderr).toBe('');
    expect(checkAfter.stdout).toBe('cuda-patchelf check: nothing to do\n');
    expect(checkAfter.code).toBe(0);
  });

  it('plan names the hook behind each entry and, like check, writes nothing', () => {
    expect(planRun.stderr).toBe('');
    expect(planRun.code).toBe(0);
    const blocks = parsePlan(planRun.stdout);
    expect(blocks.map((b) => relative(tree.root, b.path)).sort()).toEqual(
      patchedNames()
        .map((e) => e.rel)
        .sort(),
    );
    for (const block of blocks) {
      const rel = relative(tree.root, block.path);
      const old = effectiveRunpath(factsOf(before, rel));
      expect(block.old, rel).toBe(old);
      expect(block.new, rel).toBe(effectiveRunpath(factsOf(after, rel)));
      expect(block.tier, rel).toBe(fileOf(report, t1.dir, rel).tier);
      expect(block.entries.map((e) => e.dir).join(':'), rel).toBe(block.new);
      expect(
        block.entries.map((e) => e.hook),
        rel,
      ).toEqual(['cuda-compat', 'driver', ...block.entries.slice(2).map(() => null)]);
      // An entry kept from the file is one the file had.
      const oldEntries = (old ?? '').split(':');
      for (const entry of block.entries.slice(2)) expect(oldEntries, rel).toContain(entry.dir);
    }
    const summary = parseSummaryLine(planRun.stdout);
    expect(summary.patched).toBe(expectedPatched(tree));
    expect(summary.bytesWritten).toBe(0);
    // Neither plan nor check touched a byte or a timestamp.
    expect([...pristineAfterDryRuns.entries()]).toEqual([...pristineSnapshot.entries()]);
  });

  it('a corrupt library fails alone: exit 3, one line naming it, the file untouched, the rest patched', async () => {
    expect(t3.result.code).toBe(3);
    const lines = stderrLines(t3.result);
    expect(lines).toHaveLength(1);
    expect(lines[0]?.startsWith(`cuda-patchelf: ${join(t3.dir, CORRUPT)}: `), lines[0]).toBe(true);
    expect(lines[0]).not.toMatch(/internal error|\n|at .*\.js:\d+/);
    expect(parseSummaryLine(t3.result.stdout).failed).toBe(1);
    expect(parseSummaryLine(t3.result.stdout).patched).toBe(expectedPatched(tree));
    const corrupt = t3.after.get(CORRUPT);
    if (corrupt?.type !== 'file') throw new Error('the corrupt file is gone');
    expect(corrupt.size).toBe(corruptSize);
    expect({ sha256: corrupt.sha256, mtimeNs: corrupt.mtimeNs }).toEqual(corruptBefore);
    // Every other file ends exactly as in the run without the corrupt file.
    const others = new Map([...t3.after].filter(([rel]) => rel !== CORRUPT));
    expect(contentDifferences(others, t1.after)).toEqual([]);
    // check still fails on it (exit 3 outranks "nothing to do") and says so in one line, and its
    // summary counts it: a tree with a failure never reads "nothing to do".
    const check = await runCli(['check', t3.dir, ...hooks()], { timeoutMs: CLI_TIMEOUT });
    expect(check.code).toBe(3);
    expect(stderrLines(check)).toEqual([lines[0]]);
    expect(check.stdout).toBe('cuda-patchelf check: 1 failed, no other file needs patching\n');
  });

  it('--jobs 1 and --jobs 4 give byte-identical trees', () => {
    // t1 ran in four worker threads (--threads-from-start; fewer where there are fewer CPUs), t2 in the main thread.
    expect(report.workerThreads).toBe(fullPoolHere(4));
    expect(contentDifferences(t1.after, t2.after)).toEqual([]);
    // And the trees did change, so the comparison means something.
    expect(contentDifferences(t1Before, t1.after).length).toBe(expectedPatched(tree) + 2);
  });
});

describe('a tree named through a symbolic link, as Nix names a build output ./result', () => {
  const dir = useTempDir('symlinked-root');

  it('is walked by check and apply: a CI gate must not pass an unpatched tree', async () => {
    const real = join(dir(), 'nix-store-output');
    await mkdir(join(real, 'lib'), { recursive: true });
    await copyFile(fixture('compiled/x86_64/libuser-runpath').path, join(real, 'lib', 'libuser.so'));
    await copyFile(fixture('compiled/x86_64/libgreet').path, join(real, 'lib', 'libgreet.so.1'));
    await symlink(real, join(dir(), 'result'));
    for (const root of [join(dir(), 'result'), `${join(dir(), 'result')}/`]) {
      const check = await runCli(['check', root], { timeoutMs: CLI_TIMEOUT });
      expect({ code: check.code, stdout: check.stdout }, root).toMatchObject({
        code: 1,
        stdout: expect.stringContaining('2 files need patching'),
      });
    }
    const applied = await runCli(['apply', join(dir(), 'result')], { timeoutMs: CLI_TIMEOUT });
    expect(applied.code).toBe(0);
    expect(parseSummaryLine(applied.stdout).patched).toBe(2);
    expect((await readDynamic(join(real, 'lib', 'libgreet.so.1')))?.runpath).toBe(DRIVER);
    // The link itself is still a link to the same place.
    expect(await readlink(join(dir(), 'result'))).toBe(real);
  });
});

describe('a static-pie executable (dynamic section, no interpreter)', () => {
  const dir = useTempDir('static-pie');

  it('still runs after apply', async () => {
    const programs = [fixture('compiled/x86_64/static-pie'), fixture('compiled/aarch64-64k/static-pie')];
    for (const f of programs) {
      await mkdir(join(dir(), f.arch), { recursive: true });
      await copyFile(f.path, join(dir(), f.arch, 'prog'));
      await appendFile(join(dir(), f.arch, 'README'), 'not ELF\n');
    }
    const result = await runCli(['apply', dir()], { timeoutMs: CLI_TIMEOUT });
    expect(result.code).toBe(0);
    const failures: string[] = [];
    for (const f of programs) {
      try {
        const { stdout } = await runProgram(f, { path: join(dir(), f.arch, 'prog') });
        if (stdout.trim() !== f.expectedOutput) failures.push(`${f.id}: printed ${stdout.trim()}`);
      } catch (error) {
        failures.push(`${f.id}: ${(error as Error).message.split('\n')[0] ?? ''}`);
      }
    }
    expect(failures).toEqual([]);
  });
});
