// The batch (src/batch/patch-tree.ts) with one thread, on trees of corpus files in a temporary
// directory: each file's outcome, the summary, hard links, files that are not ELF, a file that fails
// while the others go on, the order of the reports, and Ctrl-C before and during a run. Then the
// batch's small values: an outcome across the thread boundary (outcome-transfer.ts), the first name of
// each inode (first-names.ts), the Ctrl-C flag (interrupt.ts) and the summary counts (file-outcome.ts).

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { countOutcome, emptySummary, type FileOutcome, patchedCount } from '../../src/batch/file-outcome.js';
import { FirstNames } from '../../src/batch/first-names.js';
import { InterruptPoll, isInterrupted, newInterruptFlag, raiseInterrupt } from '../../src/batch/interrupt.js';
import { deserializeOutcome, serializeOutcome } from '../../src/batch/outcome-transfer.js';
import { type BatchOptions, patchTrees } from '../../src/batch/patch-tree.js';
import { processFile } from '../../src/batch/process-file.js';
import { asFileError, CudaPatchelfError } from '../../src/errors/cuda-patchelf-error.js';
import { driverHook } from '../../src/hook-engine/builtin-hooks.js';
import { ascii, latin1 } from '../helpers/byte-strings.js';
import { useTempDir } from '../helpers/use-temp-dir.js';
import { corpus, MIXED_TREE, textFile, treeIn } from './helpers/corpus-tree.js';
import { dynamicStrings } from './helpers/plan-in-memory.js';

const scratch = useTempDir('unit-patch-trees');

const DRIVER_LIB = '/run/opengl-driver/lib';

/** One thread (jobs 1), whatever the CPUs: no worker thread is started. */
const ONE_THREAD: BatchOptions = { hooks: [driverHook()], semantics: 'default', dryRun: true, jobs: 1, cpuCount: 4 };

/** Each outcome as [path below the tree, status, what tells it apart]. */
function rows(tree: string, outcomes: readonly FileOutcome[]): [string, string, string | null][] {
  return outcomes.map((outcome) => {
    const path = outcome.path.slice(tree.length + 1);
    switch (outcome.status) {
      case 'patched':
        return [path, outcome.status, outcome.newRunpath];
      case 'unchanged':
        return [path, outcome.status, outcome.runpath];
      case 'skipped':
        return [
          path,
          outcome.status,
          outcome.detail === undefined ? outcome.reason : `${outcome.reason} of ${outcome.detail.slice(tree.length + 1)}`,
        ];
      case 'failed':
        return [path, outcome.status, outcome.error.describe().slice(outcome.path.length + 2)];
      default:
        return [path, outcome.status, null];
    }
  });
}

async function runpathOf(path: string): Promise<{ runpath: string | null; rpath: string | null }> {
  const { runpath, rpath } = await dynamicStrings(new Uint8Array(await readFile(path)));
  return { runpath, rpath };
}

describe('patchTrees, one thread', () => {
  it('reports every file of a dry run in path order, counts them, and writes nothing', async () => {
    const tree = await treeIn(scratch(), { ...MIXED_TREE, 'notes.txt': textFile('a file of the root\n') });
    const heard: string[] = [];
    const result = await patchTrees([tree], { ...ONE_THREAD, onOutcome: (outcome) => heard.push(outcome.path.slice(tree.length + 1)) });
    expect(rows(tree, result.outcomes)).toEqual([
      ['bin/app', 'patched', `${DRIVER_LIB}:$ORIGIN/../lib:/opt/corpus/lib`],
      ['lib/broken.so', 'failed', 'truncated ELF file: 14 bytes, shorter than e_ident'],
      ['lib/liblld.so', 'patched', `${DRIVER_LIB}:/opt/corpus/lld`],
      ['lib/libplain.so', 'patched', DRIVER_LIB],
      ['lib/libplain.so.1', 'skipped', 'hard-link of lib/libplain.so'],
      ['lib/librpath.so', 'patched', `${DRIVER_LIB}:/opt/corpus/rpath`],
      ['lib/libz.so', 'skipped', 'symlink'],
      ['notes.txt', 'skipped', 'not-elf'],
      ['share/README', 'skipped', 'not-elf'],
    ]);
    // As each file is done: in walk order (a directory's files before its subdirectories).
    expect(heard[0]).toBe('notes.txt');
    expect([...heard].sort()).toEqual(result.outcomes.map((outcome) => outcome.path.slice(tree.length + 1)));
    expect(result.summary).toEqual({
      visited: 9,
      patched: { append: 4 },
      unchanged: 0,
      skipped: { 'hard-link': 1, symlink: 1, 'not-elf': 2 },
      wouldRefuse: 0,
      failed: 1,
      bytesWritten: 0,
      patchedWithOtherLinks: 1,
    });
    const plain = result.outcomes.find((outcome) => outcome.path.endsWith('/libplain.so'));
    expect(plain).toMatchObject({ status: 'patched', tier: 'append', oldRunpath: null, otherLinks: 1, bytesWritten: 0 });
    expect(result).toMatchObject({ threadLimit: 1, workerThreads: 0, resolution: null, complete: true });
    expect(await readFile(join(tree, 'lib/libplain.so'))).toEqual(Buffer.from(corpus('x86_64-lib-plain.so')));
  });

  it('writes each inode once, through its first name, keeps DT_RPATH, and leaves nothing for a second run', async () => {
    const tree = await treeIn(scratch(), MIXED_TREE);
    const applied = await patchTrees([tree], { ...ONE_THREAD, dryRun: false });
    expect(applied.summary.patched).toEqual({ append: 4 });
    expect(applied.summary.failed).toBe(1);
    const written = applied.outcomes.filter((outcome) => outcome.status === 'patched').map((outcome) => outcome.bytesWritten);
    expect(written.every((bytes) => bytes > 0)).toBe(true);
    expect(applied.summary.bytesWritten).toBe(written.reduce((a, b) => a + b, 0));
    expect(await runpathOf(join(tree, 'lib/libplain.so.1'))).toEqual({ runpath: DRIVER_LIB, rpath: null });
    expect(await runpathOf(join(tree, 'lib/librpath.so'))).toEqual({ runpath: null, rpath: `${DRIVER_LIB}:/opt/corpus/rpath` });
    const again = await patchTrees([tree], { ...ONE_THREAD, dryRun: false });
    expect(again.summary).toMatchObject({ patched: {}, unchanged: 4, failed: 1, bytesWritten: 0 });
  });

  it('under --nixpkgs-compat prepends once per name of a hard-linked file, as Nixpkgs patches it once per name', async () => {
    const tree = await treeIn(scratch(), {
      'lib/libplain.so': corpus('x86_64-lib-plain.so'),
      'lib/libplain.so.1': { hardLink: 'lib/libplain.so' },
    });
    const result = await patchTrees([tree], { ...ONE_THREAD, semantics: 'nixpkgs-compat' });
    expect(rows(tree, result.outcomes)).toEqual([
      ['lib/libplain.so', 'patched', `${DRIVER_LIB}:${DRIVER_LIB}:`],
      ['lib/libplain.so.1', 'skipped', 'hard-link of lib/libplain.so'],
    ]);
  });

  it('fails a file named on the command line that is not ELF, where a tree would skip it', async () => {
    const tree = await treeIn(scratch(), { README: textFile('text\n'), 'lib.so': corpus('x86_64-lib-lld.so') });
    const result = await patchTrees([join(tree, 'README'), join(tree, 'lib.so')], ONE_THREAD);
    expect(rows(tree, result.outcomes)).toEqual([
      ['README', 'failed', 'not an ELF file (no \\x7fELF magic) (at offset 0x0)'],
      ['lib.so', 'patched', `${DRIVER_LIB}:/opt/corpus/lld`],
    ]);
  });

  it('reports a tree that does not exist as a failure, and walks the others', async () => {
    const tree = await treeIn(scratch(), { 'lib.so': corpus('x86_64-lib-lld.so') });
    const result = await patchTrees([join(tree, 'missing'), tree], ONE_THREAD);
    expect(result.outcomes.map((outcome) => outcome.status)).toEqual(['patched', 'failed']);
    expect(result.summary).toMatchObject({ visited: 2, failed: 1 });
  });
});

describe('Ctrl-C', () => {
  const threeLibraries = { 'a.so': corpus('x86_64-lib-lld.so'), 'b.so': corpus('x86_64-lib-lld.so'), 'c.so': corpus('x86_64-lib-lld.so') };

  it('before the batch: no file is done, and the run says it is incomplete', async () => {
    const tree = await treeIn(scratch(), threeLibraries);
    const interrupt = newInterruptFlag();
    raiseInterrupt(interrupt);
    const result = await patchTrees([tree], { ...ONE_THREAD, dryRun: false, interrupt });
    expect(result.outcomes).toEqual([]);
    expect(result.summary.visited).toBe(0);
    expect(result.complete).toBe(false);
    expect(await readFile(join(tree, 'a.so'))).toEqual(Buffer.from(corpus('x86_64-lib-lld.so')));
  });

  it('as the first file is done: that file is written, the others are left as they were', async () => {
    const tree = await treeIn(scratch(), threeLibraries);
    const interrupt = newInterruptFlag();
    const result = await patchTrees([tree], { ...ONE_THREAD, dryRun: false, interrupt, onOutcome: () => raiseInterrupt(interrupt) });
    expect(rows(tree, result.outcomes)).toEqual([['a.so', 'patched', `${DRIVER_LIB}:/opt/corpus/lld`]]);
    expect(result.complete).toBe(false);
    expect((await runpathOf(join(tree, 'a.so'))).runpath).toBe(`${DRIVER_LIB}:/opt/corpus/lld`);
    for (const name of ['b.so', 'c.so']) expect(await readFile(join(tree, name))).toEqual(Buffer.from(corpus('x86_64-lib-lld.so')));
  });

  it('a file not started while the flag is up is not opened: its outcome says so', async () => {
    const interrupt = newInterruptFlag();
    raiseInterrupt(interrupt);
    const item = { kind: 'file', path: join(scratch(), 'no-such-file.so'), relativePath: 'no-such-file.so' } as const;
    expect(await processFile(item, { ...ONE_THREAD, interrupt })).toEqual({ path: item.path, status: 'interrupted' });
  });
});

/** An outcome as a worker thread sends it: serialized, then structured-cloned as postMessage does. */
const transferred = (outcome: FileOutcome): FileOutcome => deserializeOutcome(structuredClone(serializeOutcome(outcome)));

const patched = ascii<Extract<FileOutcome, { status: 'patched' }>>({
  path: '/t/lib.so',
  status: 'patched',
  tier: 'append',
  oldRunpath: '/old',
  newRunpath: '/new:/old',
  entries: [
    { dir: '/new', hook: 'driver' },
    { dir: '/old', hook: null },
  ],
  otherLinks: 1,
  bytesWritten: 120,
});

describe('outcome transfer', () => {
  it('carries every outcome but a failure as it is', () => {
    const outcomes: FileOutcome[] = [
      patched,
      { path: '/t/a', status: 'unchanged', runpath: null },
      { path: '/t/b', status: 'skipped', reason: 'hard-link', detail: '/t/a' },
      { ...patched, status: 'would-refuse', refusal: 'read-only' },
      { path: '/t/c', status: 'interrupted' },
    ];
    for (const outcome of outcomes) expect(transferred(outcome)).toEqual(outcome);
  });

  it("rebuilds a failure's error with its kind, file and offset, which a plain clone would lose", () => {
    const error = new CudaPatchelfError('format', 'bad table', { file: '/t/lib.so', offset: 0x40 });
    const cloned = structuredClone({ path: '/t/lib.so', status: 'failed', error });
    expect(cloned.error).not.toBeInstanceOf(CudaPatchelfError);
    const back = transferred({ path: '/t/lib.so', status: 'failed', error });
    if (back.status !== 'failed') throw new Error('not a failure');
    expect(back.error).toBeInstanceOf(CudaPatchelfError);
    expect([back.error.kind, back.error.file, back.error.offset, back.error.describe()]).toEqual([
      'format',
      '/t/lib.so',
      0x40,
      '/t/lib.so: bad table (at offset 0x40)',
    ]);
    const bare = serializeOutcome({ path: '/t/x', status: 'failed', error: new CudaPatchelfError('io', 'gone') });
    expect(bare).toEqual({ path: '/t/x', status: 'failed', error: { kind: 'io', message: 'gone' } });
  });

  it("keeps the stack of an internal error's cause, which says where the bug is", () => {
    const bug = new TypeError('x is undefined');
    const back = transferred({ path: '/t/lib.so', status: 'failed', error: asFileError(bug, '/t/lib.so') });
    if (back.status !== 'failed') throw new Error('not a failure');
    expect(back.error.kind).toBe('internal');
    expect(back.error.message).toBe(bug.stack);
    expect(back.error.message).toMatch(/^TypeError: x is undefined\n\s+at /);
  });
});

describe('FirstNames', () => {
  it('gives the first name of an inode to its later names, and none to the first', () => {
    const names = new FirstNames();
    const inode = { dev: 1, ino: 42 };
    expect(names.recordName('/t/lib.so', inode)).toBeNull();
    expect(names.recordName('/t/lib.so.1', inode)).toBe('/t/lib.so');
    expect(names.recordName('/t/lib.so.1.2', inode)).toBe('/t/lib.so');
    // The first name seen again is still the one to patch.
    expect(names.recordName('/t/lib.so', inode)).toBeNull();
    // The same inode number on another device is another file.
    expect(names.recordName('/u/lib.so', { dev: 2, ino: 42 })).toBeNull();
  });
});

describe('the Ctrl-C flag', () => {
  it('is down until raised, and a copy sent to another thread sees it raised', async () => {
    const flag = newInterruptFlag();
    const sent = structuredClone(flag);
    const poll = new InterruptPoll(flag);
    expect([isInterrupted(flag), isInterrupted(sent), await poll.interrupted()]).toEqual([false, false, false]);
    raiseInterrupt(flag);
    expect([isInterrupted(flag), isInterrupted(sent), await poll.interrupted()]).toEqual([true, true, true]);
  });

  it('is never up without a flag (a dry run catches no Ctrl-C)', async () => {
    expect(isInterrupted(undefined)).toBe(false);
    expect(await new InterruptPoll(undefined).interrupted()).toBe(false);
  });
});

describe('the summary', () => {
  it('counts each outcome where it belongs', () => {
    const summary = emptySummary();
    const outcomes: FileOutcome[] = [
      patched,
      { ...patched, tier: 'in-place', otherLinks: 0, bytesWritten: 8 },
      { ...patched, tier: 'in-place', otherLinks: 0, bytesWritten: 0 },
      { ...patched, status: 'would-refuse', refusal: 'read-only' },
      { path: '/t/a', status: 'unchanged', runpath: latin1('/x') },
      { path: '/t/b', status: 'skipped', reason: 'not-elf' },
      { path: '/t/c', status: 'skipped', reason: 'not-elf' },
      { path: '/t/d', status: 'failed', error: new CudaPatchelfError('io', 'gone') },
    ];
    for (const outcome of outcomes) countOutcome(summary, outcome);
    expect(summary).toEqual({
      visited: 8,
      patched: { append: 1, 'in-place': 2 },
      unchanged: 1,
      skipped: { 'not-elf': 2 },
      wouldRefuse: 1,
      failed: 1,
      bytesWritten: 128,
      patchedWithOtherLinks: 1,
    });
    expect(patchedCount(summary)).toBe(3);
  });
});
