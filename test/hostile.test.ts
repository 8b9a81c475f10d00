// Hostile trees: `apply` over read-only files, files without read permission, files in read-only and
// unreadable directories, FIFOs, sockets, device nodes, symbolic link loops, links out of the tree,
// names with spaces, newlines and bytes that are not UTF-8, trees deeper than PATH_MAX, and files
// truncated while the walk runs. Each entry gets a clear outcome of its own, nothing is written where
// it should not be, nothing outside the tree changes, and nothing crashes or hangs.
//
// Root may read and write whatever it likes (CI runs as root): the tree is checked as root, with what
// root really gets, and handed to an unprivileged user and checked again through setpriv.

import { createHash } from 'node:crypto';
import { chmod, copyFile, lstat, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMPAT_DIR } from './campaign/kill-campaign.js';
import { fixture, requireTool } from './helpers/fixtures.js';
import {
  CUT_MOMENTS,
  HOSTILE_LIBRARY,
  UNPRIVILEGED,
  buildHostileTree,
  buildTooDeepFile,
  cutHookModule,
  type FileCut,
  type HostileEntry,
  type HostileExpectation,
  type HostileTree,
} from './helpers/hostile-tree.js';
import { assertCliBuilt, runCli, stderrLines, type CliResult } from './helpers/run-cli.js';
import { mapLimited } from './helpers/map-limited.js';
import { parseReport, type ReportFile, type TreeReport } from './helpers/tree-report.js';
import { contentDifferences, snapshotTree } from './helpers/tree-tools.js';
import { readDynamic } from './helpers/readelf.js';
import { mustExec } from './helpers/exec.js';
import { makeTempDir } from './helpers/temp-dir.js';

const isRoot = process.getuid?.() === 0;
if (!isRoot && process.env.CI === 'true') throw new Error('the hostile-tree test needs root (mknod, chown, setpriv): CI runs as root');

/** A FIFO opened for reading would block here for ever; everything else takes a second. */
const RUN_MS = 60_000;
const apply = (root: string, extra: readonly string[] = [], wrapper?: readonly string[]): Promise<CliResult> =>
  runCli(['apply', root, '--cuda-compat', COMPAT_DIR, '--json', ...extra], {
    timeoutMs: RUN_MS,
    ...(wrapper === undefined ? {} : { wrapper }),
  });

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');
let libraryHash: string;
let scratch: string;

beforeAll(async () => {
  assertCliBuilt();
  scratch = await makeTempDir('hostile');
  // The unprivileged user must reach the trees below.
  await chmod(scratch, 0o755);
  libraryHash = sha256(await readFile(fixture(HOSTILE_LIBRARY).path));
});
afterAll(async () => {
  // Directories closed to everyone must be opened again before they can be removed, and a tree
  // deeper than PATH_MAX is removed by rm, which walks it with relative steps (Node's rm cannot).
  await mustExec('chmod', ['-R', 'u+rwx', scratch]).catch(() => undefined);
  await mustExec('rm', ['-rf', '--', scratch]);
});

interface Checked {
  readonly tree: HostileTree;
  readonly result: CliResult;
  readonly report: TreeReport;
  readonly outsideBefore: Awaited<ReturnType<typeof snapshotTree>>;
}

async function applyToHostileTree(name: string, owner: typeof UNPRIVILEGED | undefined, extra: readonly string[] = []): Promise<Checked> {
  const tree = await buildHostileTree(join(scratch, name), owner);
  const outsideBefore = await snapshotTree(tree.outside);
  const wrapper =
    owner === undefined ? undefined : [requireTool('setpriv'), `--reuid=${owner.uid}`, `--regid=${owner.gid}`, '--clear-groups'];
  const result = await apply(tree.root, extra, wrapper);
  return { tree, result, report: parseReport(result.stdout), outsideBefore };
}

function reportedFile(checked: Checked, entry: HostileEntry): ReportFile | undefined {
  return checked.report.files.find((f) => f.path === `${checked.tree.root}/${entry.reported}`);
}

function outcomeProblem(file: ReportFile | undefined, expected: HostileExpectation): string | null {
  if (expected.status === 'no-line') return file === undefined ? null : `reported as ${file.status}, expected no line of its own`;
  if (file === undefined) return `not reported, expected ${expected.status}`;
  if (file.status !== expected.status) return `${file.status} (${file.reason ?? file.error?.message ?? ''}), expected ${expected.status}`;
  if (expected.status === 'skipped' && file.reason !== expected.reason)
    return `skipped as ${file.reason ?? '?'}, expected ${expected.reason}`;
  if (expected.status === 'failed' && !expected.message.test(file.error?.message ?? ''))
    return `failed with "${file.error?.message ?? ''}", expected ${String(expected.message)}`;
  return null;
}

/** The checks every run over the hostile tree must pass, with the expectations of the user it ran as. */
function hostileTreeChecks(
  name: string,
  owner: typeof UNPRIVILEGED | undefined,
  expectationOf: (entry: HostileEntry) => HostileExpectation,
  extra: readonly string[] = [],
): void {
  let checked: Checked;
  beforeAll(async () => {
    checked = await applyToHostileTree(name, owner, extra);
  }, 120_000);

  it('finishes without a hang or a crash, exit 3 for the files it could not patch', () => {
    expect(checked.result.signal, 'killed at the time bound: something blocked').toBeNull();
    expect(checked.result.stderr).not.toMatch(/internal error|at .*\.js:\d+/);
    expect(checked.result.code, checked.result.stderr).toBe(checked.report.summary.failed > 0 ? 3 : 0);
  });

  it('gives each entry its own clear outcome', () => {
    const problems = checked.tree.entries.flatMap((entry) => {
      const problem = outcomeProblem(reportedFile(checked, entry), expectationOf(entry));
      return problem === null ? [] : [`${JSON.stringify(entry.reported)}: ${problem}`];
    });
    expect(problems).toEqual([]);
    const expected = new Set(checked.tree.entries.map((entry) => `${checked.tree.root}/${entry.reported}`));
    expect(
      checked.report.files.map((f) => f.path).filter((path) => !expected.has(path)),
      'outcomes for entries the tree does not have',
    ).toEqual([]);
  });

  it('prints one stderr line per failed file, however the file is named', () => {
    const lines = stderrLines(checked.result);
    expect(
      lines.filter((line) => !line.startsWith('cuda-patchelf: ')),
      'lines that are not a file failure',
    ).toEqual([]);
    expect(lines).toHaveLength(checked.report.summary.failed);
  });

  it('writes the patched files, and no other file, directory or anything outside the tree', async () => {
    const problems = await mapLimited(checked.tree.entries, 4, async (entry): Promise<string[]> => {
      if (!entry.file) return [];
      // Root reads every file back, whatever its mode.
      const bytes = await readFile(entry.onDisk);
      const patched = expectationOf(entry).status === 'patched';
      if (patched !== (sha256(bytes) !== libraryHash)) return [`${JSON.stringify(entry.reported)}: ${patched ? 'not written' : 'written'}`];
      if (patched) {
        const runpath = (await readDynamic(entry.onDisk.toString()))?.runpath ?? '';
        if (!runpath.startsWith(`${COMPAT_DIR}/compat:/run/opengl-driver/lib:`))
          return [`${JSON.stringify(entry.reported)}: runpath ${runpath}`];
      }
      return [];
    });
    expect(problems.flat()).toEqual([]);
    expect(contentDifferences(checked.outsideBefore, await snapshotTree(checked.tree.outside))).toEqual([]);
    expect((await readdir(join(checked.tree.root, 'read-only-dir'))).sort(), 'no temporary file in the read-only directory').toEqual([
      'inside.so',
    ]);
    expect((await readdir(join(checked.tree.root, '..'))).sort(), 'nothing next to the tree').toEqual(['outside', 'tree']);
  });

  it('keeps the modes of the files it did not patch, and of the read-only ones it did', async () => {
    const modes = await mapLimited(
      checked.tree.entries,
      4,
      async (entry) => [entry.reported, (await lstat(entry.onDisk)).mode & 0o7777] as const,
    );
    const mode = new Map(modes);
    expect(mode.get('read-only.so')).toBe(0o444);
    expect(mode.get('no-read.so')).toBe(owner === undefined ? 0o000 : 0o200);
  });
}

describe.skipIf(!isRoot)('a hostile tree, as root', () => {
  hostileTreeChecks('as-root', undefined, (entry) => entry.asRoot);
});

describe.skipIf(!isRoot)('a hostile tree, as root with --make-writable: read-only files are patched, their modes restored', () => {
  const writable = new Set(['read-only.so', 'read-only\nnewline.so', 'no-read.so']);
  hostileTreeChecks('as-root-make-writable', undefined, (entry) => (writable.has(entry.reported) ? { status: 'patched' } : entry.asRoot), [
    '--make-writable',
  ]);
});

describe.skipIf(!isRoot)('a hostile tree, as an unprivileged owner (setpriv)', () => {
  hostileTreeChecks('as-user', UNPRIVILEGED, (entry) => entry.asUser);
});

// Without root, a read-only file's open for writing fails: --make-writable gives its owner write
// permission for the write and takes it away again.
describe.skipIf(!isRoot)(
  'a hostile tree, as an unprivileged owner with --make-writable: read-only files are patched, their modes restored',
  () => {
    const writable = new Set(['read-only.so', 'read-only\nnewline.so']);
    hostileTreeChecks(
      'as-user-make-writable',
      UNPRIVILEGED,
      (entry) => (writable.has(entry.reported) ? { status: 'patched' } : entry.asUser),
      ['--make-writable'],
    );
  },
);

// nixpkgs-compat takes a stat of every file the walk lists, to count each inode's names: a file it
// cannot stat (in a directory it may list but not search) is reported as the others are.
describe.skipIf(!isRoot)('a hostile tree, as an unprivileged owner, under --nixpkgs-compat', () => {
  hostileTreeChecks('as-user-compat', UNPRIVILEGED, (entry) => entry.asUser, ['--nixpkgs-compat']);
});

describe.skipIf(!isRoot)('a tree deeper than PATH_MAX', () => {
  it('patches what a path can name, reports the directory it cannot read, and goes on', async () => {
    const root = join(scratch, 'deep');
    await mustExec('mkdir', ['-p', join(root, 'shallow', ...Array.from({ length: 300 }, () => 'd'))]);
    const shallow = join(root, 'shallow', ...Array.from({ length: 300 }, () => 'd'), 'lib.so');
    await copyFile(fixture(HOSTILE_LIBRARY).path, shallow);
    await mustExec('mkdir', ['-p', join(root, 'too-deep')]);
    // 25 levels of 200 letters: 5,025 bytes of path.
    const step = await buildTooDeepFile(join(root, 'too-deep'), 25, 200);
    await copyFile(fixture(HOSTILE_LIBRARY).path, join(root, 'zz-after.so'));

    const result = await apply(root);
    const report = parseReport(result.stdout);
    expect(result.signal).toBeNull();
    expect(result.code).toBe(3);
    expect(
      report.files
        .filter((f) => f.status === 'patched')
        .map((f) => f.path)
        .sort(),
    ).toEqual([shallow, join(root, 'zz-after.so')].sort());
    const failed = report.files.filter((f) => f.status === 'failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]?.error?.message).toMatch(/cannot read the directory: .*name too long/i);
    // The file below the limit is reached through relative steps only: it is as it was.
    const { stdout } = await mustExec('bash', [
      '-c',
      `cd "$1" && for _ in $(seq 25); do cd ${step}; done && sha256sum lib.so`,
      'bash',
      join(root, 'too-deep'),
    ]);
    expect(stdout.split(' ')[0]).toBe(libraryHash);
  }, 120_000);
});

describe('files truncated while apply walks the tree', () => {
  // Copies of a library with a large .dynstr are cut at each moment of apply's work on a file
  // (CUT_MOMENTS, which also says which moment is left out and why), to each size: empty, inside the ELF
  // magic, inside the ELF header, after the program headers, half way, and 100 bytes short (inside the
  // section header table). The CLI's own process makes each cut at its moment (cutHookModule), so every
  // run sees the same cuts, whatever the timing.
  const CLEAR = /truncated|too short|runs past the end of the file|shrank|changed on disk|empty file|not an ELF file/;
  /** What apply reads of a file before its stat: the first block (FileHead.openWalked). */
  const FIRST_BLOCK = 4096;

  it.each([1, 2])(
    'refuses each cut file with a clear error, patches the others, and a second run has nothing new to fail on (--jobs %i)',
    async (jobs) => {
      const root = join(scratch, `truncated-jobs-${jobs}`);
      await mustExec('mkdir', ['-p', root]);
      const library = fixture('compiled/x86_64/big-dynstr').path;
      const size = (await lstat(library)).size;
      const sizes = [0, 3, 40, 2000, Math.floor(size / 2), size - 100];
      const cuts: FileCut[] = CUT_MOMENTS.flatMap((moment) =>
        sizes.map((to) => ({ path: join(root, `cut-${moment}-${to}.so`), moment, size: to })),
      );
      const whole = Array.from({ length: 20 }, (_, i) => join(root, `whole-${String(i).padStart(2, '0')}.so`));
      await mapLimited([...cuts.map((cut) => cut.path), ...whole], 8, (path) => copyFile(library, path));
      const hook = join(scratch, `truncated-jobs-${jobs}-hook.mjs`);
      await writeFile(hook, cutHookModule(cuts));

      // With more than one thread, the pool starts with the batch and patches every ELF file: the cuts
      // made after the first block was read land in worker threads.
      const jobsFlag = ['--jobs', String(jobs), '--threads-from-start'];
      const first = await apply(root, jobsFlag, [requireTool('env'), `NODE_OPTIONS=--import=${hook}`]);
      const second = await apply(root, jobsFlag);
      for (const result of [first, second]) {
        expect(result.signal).toBeNull();
        expect(result.stderr).not.toMatch(/internal error/);
        const report = parseReport(result.stdout);
        const unclear = report.files.filter((f) => f.status === 'failed').filter((f) => !CLEAR.test(f.error?.message ?? ''));
        expect(unclear.map((f) => `${f.path}: ${f.error?.message ?? ''}`)).toEqual([]);
        expect(result.code).toBe(report.summary.failed > 0 ? 3 : 0);
      }
      // Each cut landed, once, at its moment: the file has the size it was cut to.
      const sizesAfter = await mapLimited(cuts, 8, async (cut) => [cut, (await lstat(cut.path)).size] as const);
      expect(sizesAfter.filter(([cut, now]) => now !== cut.size).map(([cut, now]) => `${cut.path}: ${now} bytes`)).toEqual([]);

      // The second run finds each cut file as the cut left it, and says what is missing.
      const asCut = (cut: FileCut): HostileExpectation =>
        cut.size < 4
          ? { status: 'skipped', reason: 'not-elf' }
          : {
              status: 'failed',
              message:
                cut.size < 64
                  ? new RegExp(`^too short for an ELF64 header \\(${cut.size} bytes\\)$`)
                  : new RegExp(`runs past the end of the file \\(size 0x${cut.size.toString(16)}\\)$`),
            };
      const firstRun = (cut: FileCut): HostileExpectation => {
        if (cut.moment === 'written') return { status: 'patched' };
        if (cut.moment === 'planned')
          return { status: 'failed', message: /^the file changed on disk while it was being planned; left alone$/ };
        // Cut after apply took the file's stat (its first block, read before, shows an ELF file): a change.
        if (cut.moment === 'reading' && cut.size >= FIRST_BLOCK) {
          return {
            status: 'failed',
            message: new RegExp(
              `^the file changed on disk while it was being read \\(${size} bytes when opened, ${cut.size} after the read\\); left alone$`,
            ),
          };
        }
        // Cut before apply read the bytes the cut removes and took its stat: the file reads as the shorter
        // file it now is, as on the second run.
        return asCut(cut);
      };
      const secondRun = asCut;
      const outcomes = (result: CliResult): Map<string, ReportFile> => new Map(parseReport(result.stdout).files.map((f) => [f.path, f]));
      for (const [result, expectedOf, wholeStatus] of [
        [first, firstRun, 'patched'],
        [second, secondRun, 'unchanged'],
      ] as const) {
        const files = outcomes(result);
        const expected = new Map<string, HostileExpectation>([
          ...cuts.map((cut) => [cut.path, expectedOf(cut)] as const),
          ...whole.map((path) => [path, { status: wholeStatus }] as const),
        ]);
        const problems = [...expected].flatMap(([path, want]) => {
          const problem = outcomeProblem(files.get(path), want);
          return problem === null ? [] : [`${path.slice(root.length + 1)}: ${problem}`];
        });
        expect(problems).toEqual([]);
        expect(files.size).toBe(expected.size);
      }
      const runpaths = await mapLimited(whole, 4, async (path) => (await readDynamic(path))?.runpath ?? '');
      expect(runpaths.filter((runpath) => !runpath.startsWith(`${COMPAT_DIR}/compat:/run/opengl-driver/lib:`))).toEqual([]);
    },
    120_000,
  );
});
