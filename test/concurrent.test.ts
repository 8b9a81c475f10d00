// Races. Two `apply` runs on one tree at once must end in the bytes one run gives, each file patched by
// one of them and the other finding nothing to do or refusing it as changed (a run that reads a file
// while the other writes it sees a mix of old and new bytes: that is a change, not a malformed file).
// Without a lock the two could interleave the writes of one file, each run's plan made for different
// bytes; src/write/file-lock.ts keeps them apart. A file that changes between planning and writing
// (size, mtime, inode) is refused with a `changed` error and left as the change made it: through the
// library (writeIfUnchanged checks the planned stats), and through the CLI while another process keeps
// changing the files.

import { appendFile, copyFile, link, readFile, rename, rm, stat, truncate, utimes } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileByteSource } from '../src/elf/byte-source.js';
import { readElfImage } from '../src/elf/elf-image.js';
import { planEditOf, type PlannedEdit } from '../src/edit/plan-file.js';
import { plannedBytes } from '../src/plan/plan.js';
import { writeIfUnchanged } from '../src/write/commit-plan.js';
import { lockName } from '../src/write/file-lock.js';
import { CudaPatchelfError } from '../src/errors/cuda-patchelf-error.js';
import { COMPAT_DIR } from './campaign/kill-campaign.js';
import { fixture } from './helpers/fixtures.js';
import { REAL_ELF_SOURCES, assembleElfTree, type ElfTreeFile } from './helpers/kill-tree.js';
import { assertCliBuilt, runCli, stderrLines } from './helpers/run-cli.js';
import { copyTree, sha256File } from './helpers/tree-tools.js';
import { readDynamic } from './helpers/readelf.js';
import { mapLimited } from './helpers/map-limited.js';
import { parseReport } from './helpers/tree-report.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { applyPlanInMemory } from './unit/helpers/plan-in-memory.js';
import { bytes } from './helpers/byte-strings.js';

const CHANGED =
  /the file changed on disk while it was being (planned|read)(?: \(\d+ bytes when opened, \d+ after the read\))?; left alone$/;
const applyArgs = (tree: string): string[] => ['apply', tree, '--cuda-compat', COMPAT_DIR];

let scratch: string;

async function treeHashes(root: string, files: readonly ElfTreeFile[]): Promise<Map<string, string>> {
  return new Map(await mapLimited(files, 8, async (f) => [f.rel, await sha256File(join(root, f.rel))] as const));
}

function differing(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): string[] {
  return [...a.keys()].filter((rel) => a.get(rel) !== b.get(rel));
}

beforeAll(async () => {
  assertCliBuilt();
  scratch = await makeTempDir('concurrent');
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('a file that changes between planning and writing (library)', () => {
  const base = fixture('compiled/x86_64/libuser-runpath').path;
  const RUNPATH = `${COMPAT_DIR}/compat:/run/opengl-driver/lib:$ORIGIN`;
  let n = 0;

  /** A fresh copy, planned for a long runpath (append tier: several writes), source closed. */
  async function planned(): Promise<{ path: string; edit: PlannedEdit; source: FileByteSource }> {
    const path = join(scratch, `lib-${n++}.so`);
    await copyFile(base, path);
    const source = FileByteSource.open(path);
    try {
      const edit = await planEditOf(await readElfImage(source), (editor) => editor.setRunpath(bytes(RUNPATH)));
      expect(edit.plan.tier).toBe('append');
      return { path, edit, source };
    } finally {
      source.close();
    }
  }

  async function expectChanged(path: string, edit: PlannedEdit, source: FileByteSource): Promise<void> {
    const before = await readFile(path);
    const error = await writeIfUnchanged(path, edit.plan, source.stats, {}).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CudaPatchelfError);
    expect((error as CudaPatchelfError).kind).toBe('changed');
    expect((error as CudaPatchelfError).describe()).toMatch(CHANGED);
    expect((await readFile(path)).equals(before), 'the changed file is left as the change made it').toBe(true);
  }

  it('grown: refused, left alone', async () => {
    const { path, edit, source } = await planned();
    await appendFile(path, Buffer.alloc(16));
    await expectChanged(path, edit, source);
  });

  it('truncated: refused, left alone', async () => {
    const { path, edit, source } = await planned();
    await truncate(path, source.size - 100);
    await expectChanged(path, edit, source);
  });

  it('same size, new mtime (rewritten in place): refused, left alone', async () => {
    const { path, edit, source } = await planned();
    const { mtime } = await stat(path);
    await utimes(path, mtime, new Date(mtime.getTime() + 1000));
    await expectChanged(path, edit, source);
  });

  it('replaced by another file (new inode): refused, and neither file written', async () => {
    const { path, edit, source } = await planned();
    const oldName = `${path}.old`;
    await link(path, oldName);
    const replacement = `${path}.new`;
    await copyFile(base, replacement);
    await rename(replacement, path);
    await expectChanged(path, edit, source);
    expect((await readFile(oldName)).equals(await readFile(base)), 'the planned inode is not written either').toBe(true);
  });

  it('unchanged: written (the check does not refuse a file nobody touched)', async () => {
    const { path, edit, source } = await planned();
    const before = await readFile(path);
    await expect(writeIfUnchanged(path, edit.plan, source.stats, {})).resolves.toBe(plannedBytes(edit.plan));
    // Every write of the plan, and nothing else: the bytes are the plan laid over the planned file.
    expect((await readFile(path)).equals(applyPlanInMemory(before, edit.plan)), 'the file is the planned result').toBe(true);
    expect(await readDynamic(path)).toEqual({ ...(await readDynamic(base)), runpath: RUNPATH });
  });
});

describe('two apply runs on one tree at once', () => {
  const ROUNDS = 10;
  let files: ElfTreeFile[];
  let pristine: string;
  let reference: Map<string, string>;

  beforeAll(async () => {
    pristine = join(scratch, 'pristine');
    files = await assembleElfTree(
      pristine,
      REAL_ELF_SOURCES.map((source) => ({ ...source, maxFiles: 40 })),
      2 * 2 ** 20,
    );
    const once = join(scratch, 'once');
    await copyTree(pristine, once);
    const run = await runCli(applyArgs(once), { timeoutMs: 120_000 });
    expect(run.code, run.stderr).toBe(0);
    reference = await treeHashes(once, files);
  }, 300_000);

  it.each(Array.from({ length: ROUNDS }, (_, i) => i + 1))(
    'round %i: the bytes of one run; a file refused by one is patched by the other',
    async (round) => {
      const tree = join(scratch, `both-${round}`);
      await copyTree(pristine, tree);
      // The second starts a little later in some rounds, so that the runs overlap at different points.
      const [a, b] = await Promise.all([
        runCli([...applyArgs(tree), '--json'], { timeoutMs: 120_000 }),
        new Promise((resolve) => setTimeout(resolve, ((round - 1) % 5) * 25)).then(() =>
          runCli([...applyArgs(tree), '--json'], { timeoutMs: 120_000 }),
        ),
      ]);
      for (const run of [a, b]) {
        expect([0, 3], run.stderr).toContain(run.code);
        expect(
          stderrLines(run).filter((line) => !CHANGED.test(line)),
          'only changed-file refusals',
        ).toEqual([]);
      }
      const patchedBy = (run: typeof a): Set<string> =>
        new Set(
          parseReport(run.stdout)
            .files.filter((f) => f.status === 'patched')
            .map((f) => f.path),
        );
      const [byA, byB] = [patchedBy(a), patchedBy(b)];
      const both = [...byA].filter((path) => byB.has(path)).length;
      console.info(
        `round ${round}: ${byA.size} patched by the first, ${byB.size} by the second, ${both} by both; ${stderrLines(a).length + stderrLines(b).length} refused as changed`,
      );
      expect(differing(reference, await treeHashes(tree, files))).toEqual([]);
      const check = await runCli(['check', tree, '--cuda-compat', COMPAT_DIR], { timeoutMs: 120_000 });
      expect(check.code, check.stdout).toBe(0);
      await rm(tree, { recursive: true, force: true });
    },
    300_000,
  );
});

describe('a file another writer holds', () => {
  const EDITS = [
    {
      command: 'apply',
      args: (path: string) => ['apply', path, '--cuda-compat', COMPAT_DIR],
      runpath: /^\/nix\/store\/0+-cuda_compat\/compat:/,
    },
    {
      command: 'add-runpath',
      args: (path: string) => ['add-runpath', '/run/opengl-driver/lib', path],
      runpath: /^\/run\/opengl-driver\/lib:/,
    },
  ];
  it.each(EDITS)('is waited for by $command, then written', async ({ command, args, runpath }) => {
    const path = join(scratch, `held-${command}.so`);
    await copyFile(fixture('compiled/x86_64/libuser-runpath').path, path);
    const holder = createServer();
    const held = await stat(path);
    await new Promise<void>((resolve) => holder.listen(lockName(held), resolve));
    const HELD_MS = 1500;
    const released = new Promise<void>((resolve) => setTimeout(() => holder.close(() => resolve()), HELD_MS));
    const run = await runCli(args(path), { timeoutMs: 60_000 });
    await released;
    expect(run.code, run.stderr).toBe(0);
    expect(run.ms).toBeGreaterThanOrEqual(HELD_MS - 100);
    expect((await readDynamic(path))?.runpath ?? '').toMatch(runpath);
  });
});

describe('apply while another process keeps changing the files (CLI)', () => {
  const COPIES = 200;
  const ATTEMPTS = 8;

  it('refuses each file that changed after planning, leaves it as the change made it, patches the rest', async () => {
    const base = fixture('compiled/x86_64/big-dynstr').path;
    const original = await sha256File(base);
    let refused = 0;
    for (let attempt = 0; attempt < ATTEMPTS && refused === 0; attempt++) {
      const paths = Array.from({ length: COPIES }, (_, i) => join(scratch, `changing-${attempt}-${i}.so`));
      await mapLimited(paths, 8, (path) => copyFile(base, path));
      // The mutator sets each file's mtime to a new value, again and again, until apply is done;
      // the bytes stay the original's.
      let done = false;
      let tick = 1_000_000;
      const mutator = (async () => {
        while (!done) for (const path of paths) await utimes(path, tick, tick++);
      })();
      const run = await runCli(['apply', ...paths, '--cuda-compat', COMPAT_DIR], { timeoutMs: 120_000 });
      done = true;
      await mutator;
      const lines = stderrLines(run);
      expect(
        lines.filter((line) => !CHANGED.test(line)),
        'only changed-file refusals',
      ).toEqual([]);
      expect(run.code, run.stderr).toBe(lines.length > 0 ? 3 : 0);
      refused += lines.length;
      console.info(`attempt ${attempt + 1}: ${lines.length} of ${COPIES} files refused as changed`);
      const patchedHashes = new Set<string>();
      for (const path of paths) {
        const hash = await sha256File(path);
        const refusedHere = lines.some((line) => line.includes(`${path}:`));
        if (refusedHere) expect(hash, `${path} was refused, so it must be as the mutator left it`).toBe(original);
        else patchedHashes.add(hash);
      }
      // Every file apply did not refuse was patched, all alike (one input, one plan).
      expect([...patchedHashes].filter((hash) => hash === original)).toEqual([]);
      expect(patchedHashes.size).toBeLessThanOrEqual(1);
      await mapLimited(paths, 8, (path) => rm(path, { force: true }));
    }
    expect(refused, `no file changed in the window between planning and writing in ${ATTEMPTS} attempts`).toBeGreaterThan(0);
  }, 600_000);
});
