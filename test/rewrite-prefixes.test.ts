// Kill-safety (docs/design.md, How a file is edited): a plan is an ordered list of writes such that every prefix leaves a valid,
// loadable file. For a matrix of fixtures and edits covering every tier and program header strategy
// the planner has (grown table, moved table, extended segment, moved .dynamic, in place), each prefix
// of each plan is applied to a fresh copy and the copy is read by our reader and readelf and loaded
// or run. The dynamic array must switch at once: every prefix shows either the old or the new values.

import { closeSync, openSync } from 'node:fs';
import { copyFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileByteSource } from '../src/elf/byte-source.js';
import { byteStringToText } from '../src/elf/byte-string.js';
import { readElfImage } from '../src/elf/elf-image.js';
import { joinRunpath, splitRunpath } from '../src/elf/runpath-list.js';
import { type DynamicEditor, addRunpathEntries } from '../src/plan/dynamic-editor.js';
import { planEditOf } from '../src/edit/plan-file.js';
import type { Plan } from '../src/plan/plan.js';
import { writeAtOffsets } from '../src/write/write-at-offsets.js';
import { type Arch, isBuildArch } from './helpers/arch.js';
import { fixture, OTHER_TOOLCHAIN_FIXTURES, requireTool, type Fixture } from './helpers/fixtures.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { copyFixture, diffLines, layoutProblems, loadProblems, readBack, type LoadCheck, type ReadBack } from './helpers/verify.js';
import { runReadelf } from './helpers/readelf.js';
import { bytes } from './helpers/byte-strings.js';

const DRIVER = '/run/opengl-driver/lib';
const LONG_DIR = `/nix/store/${'p'.repeat(32)}-cuda-patchelf-prefix-test-with-a-runpath-entry-long-enough-to-grow-the-table/lib`;
/** More new DT_NEEDED entries than any linker leaves spare DT_NULL slots for: .dynamic must move. */
const EXTRA_NEEDED = ['libm.so.6', 'libdl.so.2', 'librt.so.1', 'libpthread.so.0', 'libutil.so.1', 'libanl.so.1'];
/** As many again, beyond the spare slots a moved .dynamic was given: it moves a second time. */
const MORE_NEEDED = ['libresolv.so.2', 'libnss_files.so.2', 'libnss_dns.so.2', 'libBrokenLocale.so.1', 'libnsl.so.1', 'libnss_compat.so.2'];

type Edit = (editor: DynamicEditor) => void;

const EDITS: Readonly<Record<string, Edit>> = {
  'set-runpath longer': (editor) => editor.setRunpath(joinRunpath([...splitRunpath(editor.runpath()).slice(0, 1), bytes(LONG_DIR)])),
  'add-runpath driver': (editor) => editor.setRunpath(addRunpathEntries(editor.runpath(), [bytes(DRIVER)], 'prepend', false)),
  'add-needed x6': (editor) => {
    for (const name of EXTRA_NEEDED) editor.addNeeded(bytes(name));
  },
  'add-needed x6 more': (editor) => {
    for (const name of MORE_NEEDED) editor.addNeeded(bytes(name));
  },
  'set-runpath shorter': (editor) => editor.setRunpath(splitRunpath(editor.runpath())[0] ?? bytes('')),
  'remove-runpath': (editor) => editor.setRunpath(null),
};

interface Case {
  readonly fixture: Fixture;
  /** Edits applied whole before the one whose prefixes are checked (to reach an edited layout). */
  readonly before: readonly string[];
  readonly edit: string;
}

const compiledCases = (variant: string, names: readonly string[], edits: readonly string[]): Case[] =>
  names.flatMap((name) => edits.map((edit) => ({ fixture: fixture(`compiled/${variant}/${name}`), before: [], edit })));

const GROWING = ['set-runpath longer', 'add-runpath driver', 'add-needed x6'];
const FULL_VARIANT_FIXTURES = [
  'pie-runpath',
  'pie-no-runpath',
  'exec-runpath',
  'exec-rpath',
  'libuser-runpath',
  'libuser-no-runpath',
  ...OTHER_TOOLCHAIN_FIXTURES,
  'no-sections',
  'big-dynstr',
];

const CASES: Case[] = [
  ...['x86_64', 'aarch64-64k', 'aarch64-4k'].flatMap((variant) => [
    ...compiledCases(variant, FULL_VARIANT_FIXTURES, GROWING),
    ...compiledCases(variant, ['pie-runpath', 'exec-rpath', 'libuser-runpath'], ['set-runpath shorter', 'remove-runpath']),
    // A second growing edit extends the segment the first one added.
    ...['pie-runpath', 'exec-runpath', 'libuser-runpath', 'libuser-runpath-lld'].map((name) => ({
      fixture: fixture(`compiled/${variant}/${name}`),
      before: ['set-runpath longer'],
      edit: 'add-runpath driver',
    })),
    { fixture: fixture(`compiled/${variant}/libuser-runpath`), before: ['add-needed x6'], edit: 'add-needed x6 more' },
    { fixture: fixture(`compiled/${variant}/pie-runpath`), before: ['add-needed x6'], edit: 'add-needed x6 more' },
  ]),
  ...compiledCases('arm', ['pie-runpath', 'exec-rpath', 'libuser-runpath'], GROWING.slice(0, 2)),
  ...compiledCases('ppc64', ['pie-runpath', 'exec-rpath', 'libuser-runpath'], GROWING.slice(0, 2)),
  ...[
    'debian/x86_64/zlib1g/libz.so.1.2.13',
    'debian/aarch64/zlib1g/libz.so.1.2.13',
    'debian/x86_64/libstdc++6/libstdc++.so.6.0.30',
    'cuda/x86_64/libcudart11.0/libcudart.so.11.8.89',
    'cuda/aarch64/libcudart11.0/libcudart.so.11.8.89',
  ].map((id) => ({ fixture: fixture(id), before: [], edit: 'add-runpath driver' })),
];

let work = '';
let prefixesChecked = 0;
let plansChecked = 0;
const strategies = new Map<string, number>();

beforeAll(async () => {
  for (const tool of ['readelf', 'qemu-aarch64']) requireTool(tool);
  work = await makeTempDir('prefixes');
});

afterAll(async () => {
  if (work !== '') await rm(work, { recursive: true, force: true });
  console.log(
    `kill-safety: ${prefixesChecked} (fixture, edit, prefix) cases checked over ${plansChecked} plans; strategies: ${[...strategies]
      .map(([name, n]) => `${name} ${n}`)
      .join(', ')}`,
  );
});

/** The plan the CLI makes (read back included); these fixtures never need the whole-file rewrite. */
async function planFor(path: string, edit: Edit): Promise<Plan> {
  const source = FileByteSource.open(path);
  try {
    const { plan } = await planEditOf(await readElfImage(source), edit);
    if (plan.tier === 'rewrite') throw new Error(`${path}: the edit needs the whole-file rewrite, which these prefixes do not model`);
    return plan;
  } finally {
    source.close();
  }
}

function applyPrefix(path: string, plan: Plan, limit: number): void {
  const fd = openSync(path, 'r+');
  try {
    writeAtOffsets(fd, plan, { limit });
  } finally {
    closeSync(fd);
  }
}

interface State {
  runpath: string | null;
  rpath: string | null;
  needed: string[];
}

const stateOf = (r: ReadBack): State => ({
  runpath: r.summary.runpath === null ? null : byteStringToText(r.summary.runpath),
  rpath: r.summary.rpath === null ? null : byteStringToText(r.summary.rpath),
  needed: r.summary.needed.map(byteStringToText),
});

/** What the planner did, named after the strategies of docs/design.md (How a file is edited) (from the fully applied plan). */
function strategyOf(arch: Arch, plan: Plan, base: ReadBack, done: ReadBack): string {
  if (plan.tier !== 'append') return plan.tier;
  const { facts } = layoutProblems(arch, base, done);
  const dynamicMoved =
    base.image.programHeaders.find((ph) => ph.p_type === 2)?.p_offset !== done.image.programHeaders.find((ph) => ph.p_type === 2)?.p_offset;
  const executable = base.image.interpreter !== null || base.image.header.e_type === 2;
  const table = facts.tableMoved
    ? `moved table (${executable ? 'executable' : 'shared object'})`
    : facts.tableGrown
      ? 'grown table'
      : facts.extended
        ? 'extended segment'
        : 'free slot';
  return `${table}${dynamicMoved ? ' + moved .dynamic' : ''}`;
}

/** Without a runpath, a compiled fixture finds libgreet in its copied lib/ through LD_LIBRARY_PATH. */
function loadCheckFor(f: Fixture, libDir: string, removesRunpath: boolean): LoadCheck {
  if (!isBuildArch(f.arch)) return { kind: 'none' };
  const libraryPath = f.origin === 'compiled' ? (f.libraryPath === null && !removesRunpath ? null : libDir) : f.libraryPath;
  if (f.kind === 'shared') return { kind: 'list', libraryPath };
  return { kind: 'run', libraryPath, output: f.expectedOutput ?? '' };
}

async function checkCase(c: Case, index: number): Promise<void> {
  const f = c.fixture;
  // The starting point: the fixture, or the fixture after the preparatory edits.
  const baseDir = join(work, `case-${index}`, 'base');
  const base = await copyFixture(f, baseDir);
  for (const name of c.before) {
    const plan = await planFor(base.file, EDITS[name] as Edit);
    applyPrefix(base.file, plan, plan.writes.length);
  }
  const plan = await planFor(base.file, EDITS[c.edit] as Edit);
  expect(plan.writes.length, 'the edit is not a noop').toBeGreaterThan(0);
  const baseBack = await readBack(base.file);
  const old = stateOf(baseBack);
  const readelfArgs = ['-h', '-l', '-d', '-S', '--dyn-syms'];
  const readelfBase = await runReadelf(readelfArgs, base.file);

  let wanted: State | null = null;
  const problems: string[] = [];
  for (let k = plan.writes.length; k >= 0; k--) {
    // Full plan first: it names the state the partial ones may also show.
    const dir = join(work, `case-${index}`, `prefix-${k}`);
    const copy = await copyFixture(f, dir);
    await copyFile(base.file, copy.file);
    applyPrefix(copy.file, plan, k);
    const where = `prefix ${k}/${plan.writes.length}${k > 0 ? ` (last write: ${plan.writes[k - 1]?.what ?? ''})` : ''}`;
    let back: ReadBack;
    try {
      back = await readBack(copy.file);
    } catch (error) {
      problems.push(`${where}: our reader fails: ${String(error)}`);
      continue;
    }
    const state = stateOf(back);
    if (k === plan.writes.length) {
      wanted = state;
      const strategy = strategyOf(f.arch, plan, baseBack, back);
      strategies.set(strategy, (strategies.get(strategy) ?? 0) + 1);
    } else if (JSON.stringify(state) !== JSON.stringify(old) && JSON.stringify(state) !== JSON.stringify(wanted)) {
      problems.push(`${where}: dynamic values are neither the old nor the new ones: ${JSON.stringify(state)}`);
    }
    problems.push(...layoutProblems(f.arch, baseBack, back).problems.map((p) => `${where}: ${p}`));
    const readelf = await runReadelf(readelfArgs, copy.file);
    if (readelf.code !== 0) problems.push(`${where}: readelf exit ${String(readelf.code)}: ${readelf.stderr}`);
    const warnings = diffLines(readelfBase.stderr.replaceAll(base.file, '<file>'), readelf.stderr.replaceAll(copy.file, '<file>'));
    if (warnings.length > 0) problems.push(`${where}: readelf warns: ${warnings.join('; ')}`);
    const check = loadCheckFor(f, copy.libDir, c.edit === 'remove-runpath');
    problems.push(...(await loadProblems(copy.file, f.arch, check, base.file)).map((p) => `${where}: ${p}`));
    await rm(dir, { recursive: true, force: true });
    prefixesChecked++;
  }
  plansChecked++;
  expect(problems, `${f.id}: ${[...c.before, c.edit].join(' then ')}`).toEqual([]);
}

describe.concurrent('every prefix of every plan leaves a valid, loadable file', () => {
  CASES.forEach((c, index) => {
    it(`${c.fixture.id}: ${[...c.before, c.edit].join(', then ')}`, () => checkCase(c, index));
  });
});

describe('the matrix reaches every strategy', () => {
  // Runs after the concurrent block (vitest runs describe blocks of a file in order).
  it('grown table, moved table, extended segment, moved .dynamic and in place all occurred', () => {
    const seen = [...strategies.keys()];
    for (const wanted of ['in-place', 'grown table', 'moved table (shared object)', 'extended segment', 'moved .dynamic']) {
      expect(
        seen.some((s) => s.includes(wanted)),
        `strategy "${wanted}" among ${JSON.stringify(seen)}`,
      ).toBe(true);
    }
  });
});
