// --nixpkgs-compat against the real thing: the Nixpkgs hook sequence (autoFixElfFiles + addDriverRunpath,
// then + addCudaCompatRunpath, with the real patchelf) on one copy of a CUDA-shaped tree (x86_64 and
// aarch64 programs, Debian and CUDA libraries, plus 32-bit ARM, big-endian ppc64 and i386 files),
// cuda-patchelf on another. For every file: the same runpath string byte for byte, the same tag kind, the same
// DT_NEEDED, and non-ELF files identical. The default semantics differ only by dedupe, dropped empty
// entries (no trailing ':') and keeping DT_RPATH.

import { copyFile, mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BuildArch, BUILD_ARCHES } from './helpers/arch.js';
import { compileLibrary } from './helpers/compile.js';
import { fixture, loadManifest, requireTool, runProgram } from './helpers/fixtures.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { cudaTreeIn, type CudaTree } from './helpers/tree-cuda.js';
import { runNixpkgsHooks } from './helpers/tree-nixpkgs.js';
import { parseReport, type TreeReport } from './helpers/tree-report.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { copiesOfTree, dedupeRunpath, hasElfMagic, snapshotTree, type TreeSnapshot } from './helpers/tree-tools.js';
import { effectiveRunpath, readDynamic, tagKind, type DynamicFacts } from './helpers/readelf.js';
import { execTool, mustExec } from './helpers/exec.js';

const DRIVER_LINK = '/run/opengl-driver';
const DRIVER = `${DRIVER_LINK}/lib`;

let work = '';
let compat = '';
let tree: CudaTree;
let nixTree = '';
let oursTree = '';
let defaultTree = '';
let snapshots: { pristine: TreeSnapshot; nix: TreeSnapshot; ours: TreeSnapshot; defaults: TreeSnapshot };
let oursReport: TreeReport;
let defaultReport: TreeReport;
/** Relative paths of regular files with the ELF magic, and what readelf says of each copy (null: no dynamic section). */
const elf = new Map<
  string,
  { pristine: DynamicFacts | null; nix: DynamicFacts | null; ours: DynamicFacts | null; defaults: DynamicFacts | null }
>();
/** Names of inodes that have more than one name in the pristine tree. */
let hardLinked = new Set<string>();
/** An i386 library, which the driver hook gives its own directory: compared on its own. */
const I386 = 'i386/lib/libi386.so';
/** Files whose comparison with Nixpkgs has a test of its own. */
/**
 * The one deliberate difference: Nixpkgs gives a static-pie a runpath, which glibc's static-pie
 * start-up asserts against; cuda-patchelf leaves it alone in both semantics (see README).
 */
const isStaticPie = (rel: string): boolean => rel.endsWith('/bin/static-pie');
const separately = (rel: string): boolean => hardLinked.has(rel) || rel === I386 || isStaticPie(rel);

/** Runpaths the fixture sources alone cannot give: repeats, an empty entry, an empty runpath. */
async function addOddRunpaths(root: string, arch: BuildArch): Promise<string[]> {
  const src = join(loadManifest().cacheDir, '..', 'src', 'user.c');
  const lib = join(root, arch, 'lib');
  const made: Array<[string, string]> = [
    ['libdup.so', `-Wl,--enable-new-dtags,-rpath,${DRIVER}:$ORIGIN::$ORIGIN`],
    ['libempty-runpath.so', '-Wl,--enable-new-dtags,-rpath,'],
    ['libdup-rpath.so', '-Wl,--disable-new-dtags,-rpath,$ORIGIN:$ORIGIN'],
  ];
  for (const [name, flag] of made) {
    await compileLibrary(join(lib, name), src, { arch, soname: null, needs: [join(lib, 'libgreet.so.1')], extra: [flag] });
  }
  // Nixpkgs visits a static-pie (it has a dynamic section): both sides must agree on that too.
  const staticPie = fixture(arch === 'x86_64' ? 'compiled/x86_64/static-pie' : 'compiled/aarch64-64k/static-pie');
  await copyFile(staticPie.path, join(root, arch, 'bin', 'static-pie'));
  return [...made.map(([name]) => `${arch}/lib/${name}`), `${arch}/bin/static-pie`];
}

/** 32-bit ARM and big-endian ppc64 files (the other compiled fixtures), and an i386 library. */
async function addOtherMachines(root: string): Promise<void> {
  for (const id of [
    'compiled/arm/libuser-runpath',
    'compiled/arm/exec-rpath',
    'compiled/arm/libgreet',
    'compiled/ppc64/libuser-runpath',
    'compiled/ppc64/exec-rpath',
    'compiled/ppc64/libgreet',
  ]) {
    const [, machine, name] = id.split('/') as [string, string, string];
    await mkdir(join(root, 'other', machine), { recursive: true });
    await copyFile(fixture(id).path, join(root, 'other', machine, name));
  }
  // No i386 C library here: -nostdlib still gives a real ELF32 EM_386 shared object with a runpath.
  const src = join(loadManifest().cacheDir, '..', 'src', 'greet.c');
  await mkdir(join(root, 'i386', 'lib'), { recursive: true });
  await mustExec(requireTool('gcc'), [
    '-m32',
    '-shared',
    '-fPIC',
    '-nostdlib',
    '-O1',
    '-o',
    join(root, I386),
    src,
    '-Wl,--enable-new-dtags,-rpath,$ORIGIN',
  ]);
}

function factsOf(rel: string): {
  pristine: DynamicFacts | null;
  nix: DynamicFacts | null;
  ours: DynamicFacts | null;
  defaults: DynamicFacts | null;
} {
  const facts = elf.get(rel);
  if (facts === undefined) throw new Error(`${rel} is not an ELF file of the tree`);
  return facts;
}

const view = (facts: DynamicFacts | null): object | null =>
  facts === null ? null : { runpath: effectiveRunpath(facts), kind: tagKind(facts), needed: facts.needed, soname: facts.soname };

beforeAll(async () => {
  for (const tool of ['patchelf', 'readelf', 'bash', 'find', 'gcc', 'aarch64-linux-gnu-gcc', 'cp']) requireTool(tool);
  assertCliBuilt();
  work = await makeTempDir('nixpkgs-diff');
  // patchelf 0.14 cannot read a file without section headers, so the oracle has nothing to say about one.
  ({ compat, tree } = await cudaTreeIn(work, { arches: BUILD_ARCHES, large: true, sectionless: false }));
  for (const arch of BUILD_ARCHES) await addOddRunpaths(tree.root, arch);
  await addOtherMachines(tree.root);
  [nixTree, oursTree, defaultTree] = await copiesOfTree(tree.root, work, ['nixpkgs', 'ours', 'default']);

  const nix = await runNixpkgsHooks(join(work, 'nixpkgs-hooks.sh'), { driverLink: DRIVER_LINK, cudaCompat: compat, outputs: [nixTree] });
  if (nix.code !== 0) throw new Error(`the Nixpkgs hook sequence failed (${String(nix.code ?? nix.signal)}):\n${nix.stderr}`);
  const ours = await runCli(['apply', oursTree, '--nixpkgs-compat', '--cuda-compat', compat, '--json'], { timeoutMs: 120_000 });
  if (ours.code !== 0) throw new Error(`apply --nixpkgs-compat exited ${String(ours.code)}:\n${ours.stderr}`);
  oursReport = parseReport(ours.stdout);
  const defaults = await runCli(['apply', defaultTree, '--cuda-compat', compat, '--json'], { timeoutMs: 120_000 });
  if (defaults.code !== 0) throw new Error(`apply exited ${String(defaults.code)}:\n${defaults.stderr}`);
  defaultReport = parseReport(defaults.stdout);

  snapshots = {
    pristine: await snapshotTree(tree.root),
    nix: await snapshotTree(nixTree),
    ours: await snapshotTree(oursTree),
    defaults: await snapshotTree(defaultTree),
  };
  hardLinked = new Set();
  for (const [rel, entry] of snapshots.pristine) {
    if (entry.type !== 'file') continue;
    if (entry.nlink > 1) hardLinked.add(rel);
    if (!(await hasElfMagic(join(tree.root, rel)))) continue;
    elf.set(rel, {
      pristine: await readDynamic(join(tree.root, rel)),
      nix: await readDynamic(join(nixTree, rel)),
      ours: await readDynamic(join(oursTree, rel)),
      defaults: await readDynamic(join(defaultTree, rel)),
    });
  }
}, 600_000);

afterAll(async () => {
  if (work !== '') await rm(work, { recursive: true, force: true });
});

describe('--nixpkgs-compat against the Nixpkgs hook sequence', () => {
  it('the tree has files with RUNPATH, RPATH and neither, of both architectures', () => {
    const kinds = [...elf.values()].flatMap((f) => (f.pristine === null ? [] : [tagKind(f.pristine)]));
    expect(new Set(kinds)).toEqual(new Set(['RUNPATH', 'RPATH', 'none']));
    expect(kinds.length).toBeGreaterThanOrEqual(50);
    expect(oursReport.semantics).toBe('nixpkgs-compat');
    expect(oursReport.hooks).toEqual(['driver', 'cuda-compat']);
  });

  it('every ELF file has the same runpath string, tag kind and DT_NEEDED as after Nixpkgs', () => {
    const differences: string[] = [];
    for (const [rel, facts] of elf) {
      if (separately(rel)) continue;
      const nix = JSON.stringify(view(facts.nix));
      const ours = JSON.stringify(view(facts.ours));
      if (nix !== ours) differences.push(`${rel}:\n  nixpkgs ${nix}\n  ours    ${ours}`);
    }
    expect(differences).toEqual([]);
    // And Nixpkgs really did something to them.
    const changed = [...elf.values()].filter(
      (f) => f.pristine !== null && JSON.stringify(view(f.nix)) !== JSON.stringify(view(f.pristine)),
    );
    expect(changed.length).toBeGreaterThanOrEqual(50);
  });

  it('patches the same set of files as Nixpkgs and leaves the same files byte-identical', () => {
    const changedBy = (after: TreeSnapshot): string[] =>
      [...after]
        .filter(([rel, entry]) => {
          const before = snapshots.pristine.get(rel);
          return entry.type !== before?.type || (entry.type === 'file' && before.type === 'file' && entry.sha256 !== before.sha256);
        })
        .map(([rel]) => rel)
        .sort();
    expect(changedBy(snapshots.ours)).toEqual(changedBy(snapshots.nix).filter((rel) => !isStaticPie(rel)));
    expect(changedBy(snapshots.nix).filter(isStaticPie)).toEqual(['aarch64/bin/static-pie', 'x86_64/bin/static-pie']);
    const untouched = [...snapshots.pristine].filter(([rel]) => !changedBy(snapshots.ours).includes(rel));
    expect(untouched.filter(([, e]) => e.type === 'file').length).toBeGreaterThanOrEqual(20);
    for (const [rel, entry] of untouched) {
      const ours = snapshots.ours.get(rel);
      if (entry.type === 'file' && ours?.type === 'file') expect(ours.sha256, rel).toBe(entry.sha256);
      if (entry.type === 'symlink' && ours?.type === 'symlink') expect(ours.target, rel).toBe(entry.target);
    }
    expect([...snapshots.ours.keys()].sort()).toEqual([...snapshots.nix.keys()].sort());
  });

  it('patchelf reads back the runpath cuda-patchelf wrote', async () => {
    for (const [rel, facts] of elf) {
      if (facts.ours === null) continue;
      const printed = await execTool(requireTool('patchelf'), ['--print-rpath', join(oursTree, rel)], { timeoutMs: 60_000 });
      expect(printed.code, `${rel}: ${printed.stderr}`).toBe(0);
      expect(printed.stdout, rel).toBe(`${effectiveRunpath(facts.ours) ?? ''}\n`);
    }
  });

  it('a static-pie: the runpath Nixpkgs gives it crashes it at start; cuda-patchelf leaves it alone and it runs', async () => {
    for (const arch of BUILD_ARCHES) {
      const rel = `${arch}/bin/static-pie`;
      const program = fixture(arch === 'x86_64' ? 'compiled/x86_64/static-pie' : 'compiled/aarch64-64k/static-pie');
      const [ours0, pristine0] = [snapshots.ours.get(rel), snapshots.pristine.get(rel)];
      expect(
        ours0?.type === 'file' && pristine0?.type === 'file' && ours0.sha256 === pristine0.sha256 && ours0.mtimeNs === pristine0.mtimeNs,
        rel,
      ).toBe(true);
      const ours = await runProgram(program, { path: join(oursTree, rel) });
      expect(ours.stdout, rel).toBe(`${program.expectedOutput ?? ''}\n`);
      await expect(runProgram(program, { path: join(nixTree, rel) }), rel).rejects.toThrow();
    }
  });

  it('a hard-linked library gets what Nixpkgs gives it: one patch per name, since find lists every name', () => {
    const names = [...hardLinked].filter((rel) => elf.get(rel)?.pristine !== null && elf.has(rel));
    expect(names.length).toBe(4);
    for (const rel of names) {
      const facts = factsOf(rel);
      expect(JSON.stringify(view(facts.ours)), rel).toBe(JSON.stringify(view(facts.nix)));
    }
  });

  it('check --nixpkgs-compat passes on the tree apply --nixpkgs-compat patched and on the one the Nixpkgs hooks patched, hard-linked files included', async () => {
    for (const root of [oursTree, nixTree]) {
      const check = await runCli(['check', root, '--nixpkgs-compat', '--cuda-compat', compat], { timeoutMs: 120_000 });
      expect(check.code, `check ${root}:\n${check.stdout}${check.stderr}`).toBe(0);
    }
  });

  it('an i386 library in an x86_64 output gets the directory the x86_64 hook writes', () => {
    const facts = factsOf(I386);
    expect(facts.pristine === null ? null : effectiveRunpath(facts.pristine)).toBe('$ORIGIN');
    // Nixpkgs substitutes one driver link per derivation (-32 only for i686 builds).
    expect(view(facts.nix)).toMatchObject({ runpath: `${compat}/compat:${DRIVER}:$ORIGIN`, kind: 'RUNPATH' });
    expect(JSON.stringify(view(facts.ours))).toBe(JSON.stringify(view(facts.nix)));
  });
});

describe('the default semantics next to Nixpkgs', () => {
  it('differ only by dedupe and dropped empty entries, and keep DT_RPATH', () => {
    const wrong: string[] = [];
    for (const [rel, facts] of elf) {
      // Whether the default should visit a static-pie at all is asked in apply-cuda-tree.test.ts.
      if (facts.pristine === null || facts.nix === null || facts.defaults === null || separately(rel) || rel.endsWith('/bin/static-pie'))
        continue;
      const want = dedupeRunpath(effectiveRunpath(facts.nix) ?? '');
      const kind = tagKind(facts.pristine) === 'none' ? 'RUNPATH' : tagKind(facts.pristine);
      if (effectiveRunpath(facts.defaults) !== want || tagKind(facts.defaults) !== kind) {
        wrong.push(`${rel}: ${tagKind(facts.defaults)} "${String(effectiveRunpath(facts.defaults))}", expected ${kind} "${want}"`);
      }
      if (JSON.stringify(facts.defaults.needed) !== JSON.stringify(facts.nix.needed)) wrong.push(`${rel}: DT_NEEDED differs`);
    }
    expect(wrong).toEqual([]);
    expect(defaultReport.semantics).toBe('default');
    // README: the default gives i386 files the -32 driver directory.
    expect(
      effectiveRunpath(factsOf(I386).defaults ?? factsOf(I386).pristine ?? { runpath: null, rpath: null, needed: [], soname: null }),
    ).toBe(`${compat}/compat:${DRIVER_LINK}-32/lib:$ORIGIN`);
  });

  it.each([
    ['x86_64/lib/libgreet.so.1', 'RUNPATH', ':', 'RUNPATH', ''],
    ['aarch64/lib/libempty-runpath.so', 'RUNPATH', ':', 'RUNPATH', ''],
    ['x86_64/lib/libdup.so', 'RUNPATH', `:${DRIVER}:$ORIGIN::$ORIGIN`, 'RUNPATH', ':$ORIGIN'],
    ['aarch64/lib/libdup-rpath.so', 'RUNPATH', ':$ORIGIN:$ORIGIN', 'RPATH', ':$ORIGIN'],
    [
      'x86_64/bin/exec-rpath',
      'RUNPATH',
      ':$ORIGIN/../lib:/opt/cuda-patchelf-fixture/lib',
      'RPATH',
      ':$ORIGIN/../lib:/opt/cuda-patchelf-fixture/lib',
    ],
    ['aarch64/lib/libcublas.so.11.11.3.6', 'RUNPATH', ':$ORIGIN', 'RUNPATH', ':$ORIGIN'],
  ])('%s: Nixpkgs %s "compat:driver%s", default %s "compat:driver%s"', (rel, nixKind, nixTail, defaultKind, defaultTail) => {
    const facts = factsOf(rel);
    const head = `${compat}/compat:${DRIVER}`;
    expect(facts.nix === null ? null : { kind: tagKind(facts.nix), runpath: effectiveRunpath(facts.nix) }).toEqual({
      kind: nixKind,
      runpath: `${head}${nixTail}`,
    });
    expect(facts.ours === null ? null : { kind: tagKind(facts.ours), runpath: effectiveRunpath(facts.ours) }).toEqual({
      kind: nixKind,
      runpath: `${head}${nixTail}`,
    });
    expect(facts.defaults === null ? null : { kind: tagKind(facts.defaults), runpath: effectiveRunpath(facts.defaults) }).toEqual({
      kind: defaultKind,
      runpath: `${head}${defaultTail}`,
    });
  });
});
