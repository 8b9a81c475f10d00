// apply, check and plan run in-process (src/cli/program.ts) through a fake CliIo, on trees of corpus
// files: usage errors and their exit code, --jobs, overlapping trees, check's exit codes, the text
// summary, the version-4 JSON report, read-only files, the driver-ahead warning and the progress line.

import { chmod, readFile, stat, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ProgressLine } from '../../src/cli/progress-line.js';
import type { CliIo } from '../../src/cli/cli-io.js';
import { VERSION } from '../../src/cli/package-files.js';
import { useTempDir } from '../helpers/use-temp-dir.js';
import { corpus, MIXED_TREE, textFile, treeIn } from './helpers/corpus-tree.js';
import { jsonOf, runInProcess } from './helpers/fake-cli-io.js';
import { resolverTree } from './helpers/resolver-tree.js';

const scratch = useTempDir('unit-cli-tree');

const DRIVER_LIB = '/run/opengl-driver/lib';

/** A program and a library, both to patch. */
const CLEAN_TREE = { 'bin/app': corpus('x86_64-pie-runpath.elf'), 'lib/liblld.so': corpus('x86_64-lib-lld.so') };

describe('usage errors: exit 2, one line, nothing read', () => {
  let tree = '';
  let empty = '';
  beforeAll(async () => {
    tree = await treeIn(scratch(), CLEAN_TREE);
    empty = await treeIn(scratch(), {});
    await symlink(tree, join(scratch(), 'tree-link'));
  });

  const cases: [string, (tree: string, empty: string) => string[], (tree: string) => string[]][] = [
    ['an unknown command', (t) => ['aply', t], () => ["unknown command 'aply': did you mean apply? (cuda-patchelf --help lists them)"]],
    ['a missing argument', () => ['apply'], () => ["missing required argument 'dirs'", 'Usage: cuda-patchelf apply [options] <dirs...>']],
    ['an unknown option', (t) => ['apply', '--jobsx', t], () => ["unknown option '--jobsx' (did you mean --jobs?)"]],
    ['--jobs 0', (t) => ['apply', '--jobs', '0', t], () => ['--jobs takes a positive whole number, not "0"']],
    ['--jobs 1.5', (t) => ['check', '--jobs', '1.5', t], () => ['--jobs takes a positive whole number, not "1.5"']],
    ['--jobs two', (t) => ['plan', '--jobs', 'two', t], () => ['--jobs takes a positive whole number, not "two"']],
    [
      '--jobs above 8192',
      (t) => ['apply', '--jobs', '8193', t],
      () => [`--jobs takes at most 8192 (no Linux machine has more CPUs; a number above this one's 4 is capped at 4), not "8193"`],
    ],
    [
      'a tree inside another',
      (t) => ['apply', t, join(t, 'lib')],
      (t) => [`${t}/lib lies inside ${t}: name each tree once, none inside another`],
    ],
    ['a tree named twice', (t) => ['check', t, t], (t) => [`${t} is the same tree as ${t}: name each tree once, none inside another`]],
    [
      'a tree named through a link to another',
      (t) => ['plan', t, join(t, '../tree-link')],
      (t) => [`${join(t, '../tree-link')} is the same tree as ${t}: name each tree once, none inside another`],
    ],
    ['a tree that does not exist', (t) => ['apply', t, join(t, 'nothing')], (t) => [`${t}/nothing: cannot walk: no such file`]],
    ['an empty path', () => ['apply', ''], () => ['an empty path was given (an unset variable?); name the output trees to walk']],
    [
      'check of a tree with no file',
      (_t, e) => ['check', e],
      (_t) => ['EMPTY: holds no file: check has nothing to check there (a mistyped path?)'],
    ],
    [
      'no hook',
      (t) => ['apply', '--no-driver', t],
      () => [
        'no hooks: --no-driver without --auto-patchelf, --cuda-compat, --drop-cuda-compat, --remove-stubs or --config leaves nothing to do',
      ],
    ],
    ['--quiet with --verbose', (t) => ['apply', '-q', '-v', t], () => ['--quiet and --verbose contradict each other']],
    [
      '--json with --verbose',
      (t) => ['plan', '--json', '--verbose', t],
      () => ['--json reports every file; --verbose is for the text output'],
    ],
    ['a resolver flag without --auto-patchelf', (t) => ['apply', '--libs', t, t], () => ['--libs needs --auto-patchelf']],
    [
      '--stubs-pattern without --remove-stubs',
      (t) => ['apply', '--stubs-pattern', '*/stubs', t],
      () => ['--stubs-pattern needs --remove-stubs'],
    ],
    [
      '--drop-cuda-compat with --cuda-compat',
      (t) => ['apply', '--cuda-compat', '/c', '--drop-cuda-compat', t],
      () => ['--drop-cuda-compat removes the directory --cuda-compat adds: give one of them'],
    ],
    [
      'a relative --driver-link',
      (t) => ['apply', '--driver-link', 'driver', t],
      () => [
        '--driver-link "driver" is relative; it must be an absolute path (a relative runpath entry is searched from the working directory of the process)',
      ],
    ],
    [
      'a hook config that cannot be read',
      (t) => ['apply', '--config', join(t, 'hooks.json'), t],
      (t) => [`${t}/hooks.json: cannot read the hook config: ENOENT: no such file or directory, open '${t}/hooks.json'`],
    ],
    [
      '--libs that does not exist',
      (t) => ['apply', '--auto-patchelf', '--libs', join(t, 'nothing'), t],
      (t) => [`${t}/nothing: --libs: no such directory or file`],
    ],
    [
      '--libc-dir that is a file',
      (t) => ['apply', '--auto-patchelf', '--libc-dir', join(t, 'bin/app'), t],
      (t) => [`${t}/bin/app: --libc-dir: not a directory`],
    ],
    [
      'a tree outside --root',
      (t) => ['plan', '--auto-patchelf', '--root', join(t, 'lib'), t],
      (t) => [`${t}: outside --root ${t}/lib: with --root the trees are patched as that system sees them`],
    ],
  ];

  it.each(cases)('%s', async (_name, argv, lines) => {
    const run = await runInProcess(argv(tree, empty), { cpuCount: 4 });
    expect(run.code).toBe(2);
    expect(run.out).toEqual([]);
    // Each line is the tool's; a usage line follows where arguments are missing.
    const expected = lines(tree).map((line) => (line.startsWith('Usage: ') ? line : `cuda-patchelf: ${line.replace(/^EMPTY/, empty)}`));
    expect(run.err).toEqual(expected);
  });

  it('left the tree as it was', async () => {
    expect(await readFile(join(tree, 'lib/liblld.so'))).toEqual(Buffer.from(corpus('x86_64-lib-lld.so')));
  });
});

describe('check, apply and plan', () => {
  it('check exits 1 listing each file to patch; apply patches them; then check exits 0', async () => {
    const tree = await treeIn(scratch(), CLEAN_TREE);
    const before = await runInProcess(['check', tree]);
    expect(before).toMatchObject({ code: 1, err: [] });
    expect(before.out).toEqual([
      `${tree}/bin/app: "$ORIGIN/../lib:/opt/corpus/lib" -> "${DRIVER_LIB}:$ORIGIN/../lib:/opt/corpus/lib"`,
      `${tree}/lib/liblld.so: "/opt/corpus/lld" -> "${DRIVER_LIB}:/opt/corpus/lld"`,
      'cuda-patchelf check: 2 files need patching',
    ]);
    const applied = await runInProcess(['apply', tree]);
    expect(applied.code).toBe(0);
    expect(applied.out).toHaveLength(1);
    expect(applied.out[0]).toMatch(
      /^cuda-patchelf apply: 2 visited · 2 patched \(2 append\) · 0 unchanged · skipped: none · 0 failed · [1-9]\d* bytes written$/,
    );
    expect(await runInProcess(['check', tree])).toEqual({ code: 0, out: ['cuda-patchelf check: nothing to do'], err: [], raw: [] });
  });

  it('check exits 3 when a file fails, whatever else it found', async () => {
    const run = await runInProcess(['check', '--quiet', await treeIn(scratch(), MIXED_TREE)]);
    expect(run.code).toBe(3);
    expect(run.out).toEqual([]);
    expect(run.err).toEqual([expect.stringMatching(/\/lib\/broken\.so: truncated ELF file: 14 bytes, shorter than e_ident$/)]);
  });

  it('apply --dry-run: the summary line, the note on hard links, the failure on stderr and exit 3; nothing written', async () => {
    const tree = await treeIn(scratch(), MIXED_TREE);
    const run = await runInProcess(['apply', '--dry-run', tree]);
    expect(run.code).toBe(3);
    expect(run.out).toEqual([
      'cuda-patchelf apply: 8 visited · 4 would patch (4 append) · 0 unchanged · skipped: 1 hard-link, 1 not-elf, 1 symlink · 1 failed · 0 bytes written',
      'note: 1 file to patch has other hard links; the change shows through every link',
    ]);
    expect(run.err).toEqual([`cuda-patchelf: ${tree}/lib/broken.so: truncated ELF file: 14 bytes, shorter than e_ident`]);
    expect(await readFile(join(tree, 'lib/libplain.so'))).toEqual(Buffer.from(corpus('x86_64-lib-plain.so')));
  });

  it('--verbose lists each ELF file patched or left alone, and no file that is not ELF', async () => {
    const tree = await treeIn(scratch(), MIXED_TREE);
    const run = await runInProcess(['apply', '--dry-run', '--verbose', tree]);
    expect(run.out.slice(0, -2)).toEqual([
      `would patch ${tree}/bin/app: "$ORIGIN/../lib:/opt/corpus/lib" -> "${DRIVER_LIB}:$ORIGIN/../lib:/opt/corpus/lib"`,
      `would patch ${tree}/lib/liblld.so: "/opt/corpus/lld" -> "${DRIVER_LIB}:/opt/corpus/lld"`,
      `would patch ${tree}/lib/libplain.so: (none) -> "${DRIVER_LIB}"`,
      `skipped ${tree}/lib/libplain.so.1: hard-link`,
      `would patch ${tree}/lib/librpath.so: "/opt/corpus/rpath" -> "${DRIVER_LIB}:/opt/corpus/rpath"`,
      `skipped ${tree}/lib/libz.so: symlink`,
    ]);
  });

  it('plan: per file to patch, its tier, both runpaths and the hook behind each entry', async () => {
    const tree = await treeIn(scratch(), { 'lib/liblld.so': corpus('x86_64-lib-lld.so'), README: textFile('text\n') });
    const run = await runInProcess(['plan', '--cuda-compat', '/opt/cuda_compat', tree]);
    expect(run.code).toBe(0);
    expect(run.out).toEqual([
      `${tree}/lib/liblld.so (append)`,
      '  old: "/opt/corpus/lld"',
      `  new: "/opt/cuda_compat/compat:${DRIVER_LIB}:/opt/corpus/lld"`,
      '    /opt/cuda_compat/compat  <- cuda-compat',
      `    ${DRIVER_LIB}  <- driver`,
      '    /opt/corpus/lld  <- file',
      'cuda-patchelf plan: 2 visited · 1 to patch (1 append) · 0 unchanged · skipped: 1 not-elf · 0 failed · 0 bytes written',
    ]);
  });

  it('apply --dry-run --json: the version-4 report, with the threads asked for and the limit the CPUs set', async () => {
    const tree = await treeIn(scratch(), {
      'lib/liblld.so': corpus('x86_64-lib-lld.so'),
      'lib/liblld.so.1': { hardLink: 'lib/liblld.so' },
      'lib/readonly.so': corpus('x86_64-lib-plain.so'),
      README: textFile('text\n'),
    });
    await chmod(join(tree, 'lib/readonly.so'), 0o444);
    const run = await runInProcess(['apply', '--dry-run', '--json', '--jobs', '3', tree], { cpuCount: 1 });
    expect(run.code).toBe(0);
    expect(run.err).toEqual([]);
    const driverEntry = { dir: DRIVER_LIB, hook: 'driver' };
    expect(jsonOf(run)).toEqual({
      version: 4,
      command: 'apply',
      dryRun: true,
      interrupted: false,
      semantics: 'default',
      hooks: ['driver'],
      jobs: { asked: 3, limit: 1 },
      workerThreads: 0,
      summary: {
        visited: 4,
        wouldPatch: { append: 1 },
        wouldRefuse: 1,
        unchanged: 0,
        skipped: { 'not-elf': 1, 'hard-link': 1 },
        failed: 0,
        bytesWritten: 0,
        patchedWithOtherLinks: 1,
      },
      files: [
        { path: `${tree}/README`, status: 'skipped', reason: 'not-elf' },
        {
          path: `${tree}/lib/liblld.so`,
          status: 'would-patch',
          tier: 'append',
          oldRunpath: '/opt/corpus/lld',
          newRunpath: `${DRIVER_LIB}:/opt/corpus/lld`,
          entries: [driverEntry, { dir: '/opt/corpus/lld', hook: null }],
          otherLinks: 1,
          bytesWritten: 0,
        },
        { path: `${tree}/lib/liblld.so.1`, status: 'skipped', reason: 'hard-link', detail: `${tree}/lib/liblld.so` },
        {
          path: `${tree}/lib/readonly.so`,
          status: 'would-refuse',
          tier: 'append',
          oldRunpath: null,
          newRunpath: DRIVER_LIB,
          entries: [driverEntry],
          otherLinks: 0,
          refusal: 'read-only file (mode 444); pass --make-writable to edit it anyway',
        },
      ],
    });
  });

  it('apply fails a read-only file unless --make-writable, which puts its mode back', async () => {
    const tree = await treeIn(scratch(), { 'lib/readonly.so': corpus('x86_64-lib-plain.so') });
    const file = join(tree, 'lib/readonly.so');
    await chmod(file, 0o444);
    const refused = await runInProcess(['apply', '-q', tree]);
    expect(refused).toMatchObject({
      code: 3,
      out: [],
      err: [`cuda-patchelf: ${file}: read-only file (mode 444); pass --make-writable to edit it anyway`],
    });
    expect(await runInProcess(['apply', '-q', '--make-writable', tree])).toMatchObject({ code: 0, out: [], err: [] });
    expect((await stat(file)).mode & 0o777).toBe(0o444);
    expect((await runInProcess(['check', tree])).code).toBe(0);
  });

  it('warns when the driver directory would go ahead of a directory with a libcuda.so.1 of its own', async () => {
    const tree = await treeIn(scratch(), {
      'lib/libapp.so': corpus('x86_64-lib-plain.so'),
      'cuda_compat/compat/libcuda.so.1': textFile(''),
    });
    const compat = join(tree, 'cuda_compat/compat');
    expect((await runInProcess(['set-runpath', compat, join(tree, 'lib/libapp.so')])).code).toBe(0);
    const run = await runInProcess(['apply', '--dry-run', '-q', tree]);
    expect(run).toMatchObject({ code: 0, out: [], err: [] });
    const warned = await runInProcess(['apply', '--dry-run', tree]);
    expect(warned.err).toEqual([
      "cuda-patchelf apply: warning: 1 file would get the driver's directory ahead of a directory that came first and holds a " +
        `libcuda.so.1 of its own, as cuda_compat's does, e.g. ${tree}/lib/libapp.so: ${DRIVER_LIB} before ${compat}; ` +
        `give --cuda-compat ${join(tree, 'cuda_compat')} to keep it first, or --drop-cuda-compat to take it out`,
    ]);
    expect((await runInProcess(['apply', '--dry-run', '--cuda-compat', join(tree, 'cuda_compat'), tree])).err).toEqual([]);
  });
});

describe('Ctrl-C', () => {
  /**
   * A terminal's Ctrl-C for a command run in-process: pressed the moment the command catches it
   * (`atOnce`), or when `press` is called; `caught` and `released` count the command's holds on it.
   */
  function ctrlC(atOnce = false) {
    let onInterrupt: (() => void) | null = null;
    const keyboard = {
      caught: 0,
      released: 0,
      press: (): void => onInterrupt?.(),
      catchInterrupt: (handler: () => void): (() => void) => {
        keyboard.caught++;
        onInterrupt = handler;
        if (atOnce) handler();
        return () => {
          keyboard.released++;
          onInterrupt = null;
        };
      },
    };
    return keyboard;
  }

  it('during apply: the files not done are left alone, the run says so and exits 130', async () => {
    const tree = await treeIn(scratch(), CLEAN_TREE);
    const keyboard = ctrlC(true);
    const run = await runInProcess(['apply', tree], { catchInterrupt: keyboard.catchInterrupt });
    expect(run.code).toBe(130);
    expect(run.err).toEqual([
      'cuda-patchelf apply: interrupted: 0 files done (0 patched), the others left untouched; apply again does the rest',
    ]);
    expect(run.out).toEqual(['cuda-patchelf apply: 0 visited · 0 patched · 0 unchanged · skipped: none · 0 failed · 0 bytes written']);
    expect(keyboard.released).toBe(1);
    expect(await readFile(join(tree, 'lib/liblld.so'))).toEqual(Buffer.from(corpus('x86_64-lib-lld.so')));
  });

  it('after the last file: nothing was left undone, which the run says, and it exits as it would have', async () => {
    const tree = await treeIn(scratch(), CLEAN_TREE);
    const keyboard = ctrlC();
    const run = await runInProcess(['apply', '--json', tree], { catchInterrupt: keyboard.catchInterrupt, onOut: keyboard.press });
    expect(run.code).toBe(0);
    expect(run.err).toEqual(['cuda-patchelf apply: Ctrl-C came when every file was done: nothing was left undone']);
    expect(jsonOf(run)).toMatchObject({ interrupted: false, summary: { patched: { append: 2 } } });
    expect([keyboard.caught, keyboard.released]).toEqual([1, 1]);
  });

  it('is not caught by a dry run, which writes nothing to stop cleanly', async () => {
    const keyboard = ctrlC();
    for (const command of [['apply', '--dry-run'], ['check'], ['plan']])
      await runInProcess([...command, await treeIn(scratch(), CLEAN_TREE)], { catchInterrupt: keyboard.catchInterrupt });
    expect(keyboard.caught).toBe(0);
  });
});

describe('--auto-patchelf', () => {
  it("check --json: each resolved file's directories and missing libraries, the run's in the summary; a missing library exits 3", async () => {
    const { root, tree } = await resolverTree(scratch());
    const flags = ['--auto-patchelf', '--root', root, '--libc-dir', '/lib64', '--libs', '/opt/deps', '--libs', '/opt/deps2'];
    const run = await runInProcess(['check', '--json', '--no-driver', ...flags, tree]);
    expect(run.code).toBe(3);
    expect(run.err).toEqual([
      `cuda-patchelf: warning: libm.so.6 is in ${root}/opt/deps and in ${root}/opt/deps2: ${root}/opt/deps/libm.so.6 is used (found first)`,
      `cuda-patchelf: ${tree}/bin/app: library libnowhere.so.3 not found`,
    ]);
    const report = jsonOf(run) as { hooks: unknown; summary: { autoPatchelf: unknown }; files: unknown[] };
    expect(report.hooks).toEqual(['auto-patchelf']);
    expect(report.summary.autoPatchelf).toEqual({
      missing: 1,
      filesMissing: 1,
      skipped: {},
      libc: { directory: `${root}/lib64`, glibcOnly: false },
    });
    expect(report.files[1]).toEqual({
      path: `${tree}/bin/app`,
      status: 'would-patch',
      tier: 'in-place',
      oldRunpath: '$ORIGIN/../lib:/opt/corpus/lib',
      newRunpath: '$ORIGIN/../lib',
      entries: [{ dir: '$ORIGIN/../lib', hook: 'auto-patchelf' }],
      otherLinks: 0,
      bytesWritten: 0,
      resolved: [{ dir: `${tree}/lib`, entry: '$ORIGIN/../lib', names: ['libplain.so'] }],
      missing: [['libnowhere.so.3']],
      ignoredMissing: [],
    });
  });

  it('plan names the libraries behind each entry the resolver wrote, and libc’s directory in the summary', async () => {
    const { root, tree } = await resolverTree(scratch());
    const flags = ['--auto-patchelf', '--root', root, '--libc-dir', '/lib64', '--libs', '/opt/deps', '--ignore-missing', 'libnowhere*'];
    const run = await runInProcess(['plan', ...flags, join(tree, 'lib')]);
    expect(run.code).toBe(0);
    expect(run.out).toContain(`    /opt/deps  <- auto-patchelf (libm.so.6)`);
    expect(run.out.at(-1)).toBe(
      `cuda-patchelf plan: 2 visited · 2 to patch (2 append) · 0 unchanged · skipped: none · 0 failed · 0 bytes written · libc ${root}/lib64`,
    );
  });
});

describe('--help and --version', () => {
  it('--version prints the package version', async () => {
    expect(await runInProcess(['--version'])).toEqual({ code: 0, out: [VERSION], err: [], raw: [] });
  });

  it("apply --help gives --jobs' default from the CPU count it is told", async () => {
    const run = await runInProcess(['apply', '--help'], { cpuCount: 16 });
    expect(run.code).toBe(0);
    const text = run.out.join('\n').replace(/\s+/g, ' ');
    expect(text).toContain('never more than the CPUs (16) or the ELF files waiting (default: half the CPUs, at least 1: 8 here;');
  });

  it('the help lists the exit codes; with no command it goes to stderr and exits 2', async () => {
    const help = await runInProcess(['--help']);
    expect(help.code).toBe(0);
    expect(help.out.join('\n')).toContain(
      'Exit codes:\n  0    everything asked for was done\n  1    check: files that apply would change\n  2    a usage error',
    );
    const bare = await runInProcess([]);
    expect([bare.code, bare.out]).toEqual([2, []]);
    expect(bare.err.join('\n')).toContain('Exit codes:');
  });
});

describe('the progress line', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('is drawn on a terminal while a tree is patched, and cleared before the summary', async () => {
    const tree = await treeIn(scratch(), CLEAN_TREE);
    const run = await runInProcess(['apply', '--dry-run', tree], { stderrIsTty: true });
    const ERASE_LINE = '\x1b[K';
    expect(run.raw[0]?.startsWith('\r1 files, ')).toBe(true);
    expect(run.raw[0]?.endsWith(` files/s${ERASE_LINE}`)).toBe(true);
    expect(run.raw.at(-1)).toBe(`\r${ERASE_LINE}`);
    for (const argv of [
      ['apply', '--dry-run', '--json', tree],
      ['apply', '--dry-run', '-q', tree],
    ])
      expect((await runInProcess(argv, { stderrIsTty: true })).raw).toEqual([]);
    expect((await runInProcess(['apply', '--dry-run', tree])).raw).toEqual([]);
  });

  it('redraws at most every 200 ms with the files done and their rate, and clears only what it drew', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1_000_000);
    const raw: string[] = [];
    const io = { errRaw: (text: string) => raw.push(text) } as Pick<CliIo, 'errRaw'> as CliIo;
    const unused = new ProgressLine(io);
    unused.clear();
    expect(raw).toEqual([]);
    const progress = new ProgressLine(io);
    vi.setSystemTime(1_000_500);
    progress.update();
    vi.setSystemTime(1_000_600);
    progress.update();
    progress.update();
    vi.setSystemTime(1_002_000);
    progress.update();
    progress.clear();
    expect(raw).toEqual(['\r1 files, 2 files/s\x1b[K', '\r4 files, 2 files/s\x1b[K', '\r\x1b[K']);
  });
});
