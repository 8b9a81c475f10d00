// The patchelf-compatible mode as a drop-in for patchelf: `@FILE` values read where patchelf reads
// them, exit status 1 on every failure, silence on success, and the same results, each compared with
// the real patchelf. Beside it, the CLI's own conventions this mode shares: unknown options reported
// in one style wherever they appear, --help documenting the mode, and edit lines that say in words
// what was done.

import { chmod, copyFile, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { fixture, requireTool, runOn } from './helpers/fixtures.js';
import { buildLibrary, buildProgram } from './helpers/doctor-trees.js';
import { retagNeeded } from './helpers/retag-needed.js';
import { execTool, mustExec, type ExecResult } from './helpers/exec.js';
import { assertCliBuilt, runCli, stderrLines, type CliResult } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { readDynamic, tagKind } from './helpers/readelf.js';
import { DT } from '../src/elf/constants.js';

const LIBRARY = 'compiled/x86_64/libuser-runpath';
const RPATH_LIBRARY = 'compiled/x86_64/libuser-rpath';
const STATIC = 'compiled/x86_64/static';
const DRIVER_LIB = '/run/opengl-driver/lib';
/** How an edit line says the file was written, whichever way the planner found. */
const WRITTEN = String.raw`\((?:edited in place|tables copied to the end of the file|file rewritten whole), \d+ bytes? written\)`;
const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

let patchelf: string;

beforeAll(() => {
  assertCliBuilt();
  patchelf = requireTool('patchelf');
  requireTool('readelf');
});

/** A directory holding `lib.so`, a copy of the fixture, and the given extra files. */
async function workDir(label: string, fixtureId: string, files: Record<string, string> = {}): Promise<string> {
  const dir = await makeTempDir(label);
  await copyFile(fixture(fixtureId).path, join(dir, 'lib.so'));
  for (const [name, content] of Object.entries(files)) await writeFile(join(dir, name), content, 'latin1');
  return dir;
}

/** What patchelf reads back from a file: its runpath line and needed libraries. */
async function patchelfView(file: string): Promise<{ rpath: string; needed: string }> {
  const rpath = await execTool(patchelf, ['--print-rpath', file]);
  const needed = await execTool(patchelf, ['--print-needed', file]);
  expect(rpath.code, rpath.stderr).toBe(0);
  expect(needed.code, needed.stderr).toBe(0);
  return { rpath: rpath.stdout, needed: needed.stdout };
}

/** Runs the same arguments through patchelf and cuda-patchelf, each in its own copy of the fixture. */
async function both(
  label: string,
  fixtureId: string,
  args: readonly string[],
  files: Record<string, string> = {},
): Promise<{ ours: CliResult; theirs: ExecResult; oursDir: string; theirsDir: string }> {
  const oursDir = await workDir(`${label}-ours`, fixtureId, files);
  const theirsDir = await workDir(`${label}-patchelf`, fixtureId, files);
  const theirs = await execTool(patchelf, args, { cwd: theirsDir });
  const ours = await runCli(args, { cwd: oursDir });
  return { ours, theirs, oursDir, theirsDir };
}

describe('@FILE values, read where patchelf reads them', () => {
  const cases: Array<{
    name: string;
    args: string[];
    files: Record<string, string>;
    result?: string;
    expected?: { rpath?: string; needed?: string };
  }> = [
    {
      name: '--set-rpath @FILE keeps the final newline',
      args: ['--set-rpath', '@value', 'lib.so'],
      files: { value: '/from/a/file\n' },
      expected: { rpath: '/from/a/file\n\n' },
    },
    { name: '--add-rpath @FILE', args: ['--add-rpath', '@value', 'lib.so'], files: { value: '/added' } },
    {
      name: '--add-needed @FILE',
      args: ['--add-needed', '@value', 'lib.so'],
      files: { value: 'libadded.so.1' },
      expected: { needed: 'libadded.so.1\nlibgreet.so.1\n' },
    },
    {
      name: '--remove-needed @FILE',
      args: ['--remove-needed', '@value', 'lib.so'],
      files: { value: 'libgreet.so.1' },
      expected: { needed: '' },
    },
    {
      name: '--output @FILE',
      args: ['--set-rpath', '/o', '--output', '@value', 'lib.so'],
      files: { value: 'written.so' },
      result: 'written.so',
      expected: { rpath: '/o\n' },
    },
    {
      name: '--replace-needed takes @FILE literally',
      args: ['--replace-needed', '@value', 'libother.so', 'lib.so'],
      files: { value: 'libgreet.so.1' },
      expected: { needed: 'libgreet.so.1\n' },
    },
    {
      name: '--allowed-rpath-prefixes takes @FILE literally',
      args: ['--shrink-rpath', '--allowed-rpath-prefixes', '@value', 'lib.so'],
      files: { value: '$ORIGIN' },
    },
    {
      name: 'a value not starting with @ is the value itself',
      args: ['--set-rpath', 'x@value', 'lib.so'],
      files: { value: '/unused' },
      expected: { rpath: 'x@value\n' },
    },
  ];

  it.each(cases)('$name: as patchelf', async ({ name, args, files, result, expected }) => {
    const run = await both(name.replace(/\W+/g, '-'), LIBRARY, args, files);
    expect(run.theirs.code, run.theirs.stderr).toBe(0);
    expect({ code: run.ours.code, stdout: run.ours.stdout, stderr: run.ours.stderr }).toEqual({
      code: 0,
      stdout: run.theirs.stdout,
      stderr: '',
    });
    const ours = await patchelfView(join(run.oursDir, result ?? 'lib.so'));
    expect(ours).toEqual(await patchelfView(join(run.theirsDir, result ?? 'lib.so')));
    expect(ours).toMatchObject(expected ?? {});
  });

  it('@FILE that cannot be read: exit 1 as patchelf, one line naming it, nothing written', async () => {
    const run = await both('missing-value', LIBRARY, ['--set-rpath', '@missing', 'lib.so']);
    expect(run.theirs.code).toBe(1);
    expect(run.ours.code).toBe(1);
    expect(stderrLines(run.ours)).toEqual(['cuda-patchelf: missing: cannot read the value of --set-rpath: no such file']);
    expect(Buffer.compare(await readFile(join(run.oursDir, 'lib.so')), await readFile(fixture(LIBRARY).path))).toBe(0);
  });

  it('a bare @: exit 1 as patchelf', async () => {
    const run = await both('bare-at', LIBRARY, ['--set-rpath', '@', 'lib.so']);
    expect(run.theirs.code).toBe(1);
    expect(run.ours.code).toBe(1);
    expect(stderrLines(run.ours)).toEqual(['cuda-patchelf: --set-rpath @: no file name after @']);
  });
});

describe('exit status 1 on any failure, as patchelf', () => {
  const failures: Array<[string, string[], Record<string, string>?]> = [
    ['a missing file', ['--print-rpath', 'nofile.so']],
    ['no input file', ['--set-rpath', '/x']],
    ['a flag without its value', ['--set-rpath']],
    ['--set-rpath with --add-rpath', ['--set-rpath', '/a', '--add-rpath', '/b', 'lib.so']],
    ['--output with two files', ['--print-rpath', '--output', 'out.so', 'lib.so', 'lib.so']],
    ['not an ELF file', ['--set-rpath', '/x', 'text'], { text: 'not an ELF file\n' }],
    ["a library's interpreter", ['--print-interpreter', 'lib.so']],
    ['an unknown option', ['--no-such-option', 'lib.so']],
  ];

  it.each(failures)('%s', async (_name, args, files) => {
    const run = await both('failure', LIBRARY, args, files ?? {});
    expect(run.theirs.code).toBe(1);
    expect(run.ours.code, run.ours.stderr).toBe(1);
    expect(run.ours.stdout).toBe('');
    const lines = stderrLines(run.ours);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^cuda-patchelf: /);
  });

  it('a patchelf flag this mode does not take: exit 1, named as such, nothing written', async () => {
    const dir = await workDir('not-taken', LIBRARY);
    const result = await runCli(['--set-soname', 'libx.so', 'lib.so'], { cwd: dir });
    expect(result.code).toBe(1);
    expect(stderrLines(result)).toEqual([
      'cuda-patchelf: --set-soname is a patchelf flag the patchelf-compatible mode does not take (see cuda-patchelf --help)',
    ]);
    expect(Buffer.compare(await readFile(join(dir, 'lib.so')), await readFile(fixture(LIBRARY).path))).toBe(0);
  });

  it("a static file's runpath", async () => {
    const run = await both('static', STATIC, ['--print-rpath', 'lib.so']);
    expect(run.theirs.code).toBe(1);
    expect(run.ours.code).toBe(1);
    expect(stderrLines(run.ours)).toEqual(['cuda-patchelf: lib.so: no dynamic section (PT_DYNAMIC): the file is statically linked']);
  });

  it('a failing file among good ones: the others are done, exit 1', async () => {
    const dir = await workDir('failure-among', LIBRARY);
    const result = await runCli(['--print-rpath', 'lib.so', 'nofile.so', 'lib.so'], { cwd: dir });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('$ORIGIN:/opt/cuda-patchelf-fixture/lib\n'.repeat(2));
    expect(stderrLines(result)).toEqual(['cuda-patchelf: nofile.so: cannot open: no such file']);
  });
});

describe("a read-only file, and a value no runpath can hold: refused as by cuda-patchelf's commands", () => {
  it('a read-only file is refused with a hint this mode takes; with --make-writable it is edited and its mode put back', async () => {
    const dir = await workDir('read-only', LIBRARY);
    await chmod(join(dir, 'lib.so'), 0o444);
    const refused = await runCli(['--set-rpath', '/x', 'lib.so'], { cwd: dir });
    expect(refused.code).toBe(1);
    expect(stderrLines(refused)).toEqual(['cuda-patchelf: lib.so: read-only file (mode 444); pass --make-writable to edit it anyway']);
    expect(Buffer.compare(await readFile(join(dir, 'lib.so')), await readFile(fixture(LIBRARY).path))).toBe(0);
    const edited = await runCli(['--set-rpath', '/x', '--make-writable', 'lib.so'], { cwd: dir });
    expect(edited.code, edited.stderr).toBe(0);
    expect((await patchelfView(join(dir, 'lib.so'))).rpath).toBe('/x\n');
    expect((await stat(join(dir, 'lib.so'))).mode & 0o7777).toBe(0o444);
  });

  it('@FILE holding a NUL byte: one line naming the flag and the file, nothing written', async () => {
    const dir = await workDir('nul-value', LIBRARY, { value: '/a\0/b' });
    const result = await runCli(['--set-rpath', '@value', 'lib.so'], { cwd: dir });
    expect(result.code).toBe(1);
    expect(stderrLines(result)).toEqual([
      'cuda-patchelf: --set-rpath @value: the file holds a NUL byte, which a runpath or a file name cannot',
    ]);
    expect(Buffer.compare(await readFile(join(dir, 'lib.so')), await readFile(fixture(LIBRARY).path))).toBe(0);
  });
});

describe('unknown options: one style wherever they appear', () => {
  it.each([
    ['before a file (no command: patchelf syntax)', ['--bogus', 'lib.so'], 1],
    ['among patchelf flags', ['--set-rpath', '/x', '--bogus', 'lib.so'], 1],
    ['after a command', ['set-runpath', '--bogus', '/x', 'lib.so'], 2],
    ['after a tree command', ['apply', '--bogus', '.'], 2],
  ])('%s', async (_name, args, code) => {
    const dir = await workDir('unknown-option', LIBRARY);
    const result = await runCli(args, { cwd: dir });
    expect(result.code).toBe(code);
    expect(stderrLines(result)).toEqual(["cuda-patchelf: unknown option '--bogus'"]);
    expect(Buffer.compare(await readFile(join(dir, 'lib.so')), await readFile(fixture(LIBRARY).path))).toBe(0);
  });

  it('every line of a usage error carries the prefix', async () => {
    const result = await runCli(['no-such-command']);
    expect(result.code).toBe(2);
    const lines = stderrLines(result);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(line).toMatch(/^cuda-patchelf: /);
  });
});

describe('--help documents the patchelf-compatible mode', () => {
  it('names every flag it takes, @FILE and the exit status', async () => {
    const result = await runCli(['--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('patchelf-compatible mode');
    for (const flag of [
      '--set-rpath RUNPATH',
      '--add-rpath RUNPATH',
      '--remove-rpath',
      '--shrink-rpath',
      '--allowed-rpath-prefixes PREFIXES',
      '--force-rpath',
      '--print-rpath',
      '--add-needed LIBRARY',
      '--remove-needed LIBRARY',
      '--replace-needed LIBRARY NEW_LIBRARY',
      '--print-needed',
      '--print-soname',
      '--print-interpreter',
      '--set-interpreter INTERPRETER',
      '--interpreter INTERPRETER',
      '--output FILE',
      '--debug',
    ]) {
      expect(result.stdout).toMatch(new RegExp(`^ +${escapeRegExp(flag)} `, 'm'));
    }
    expect(result.stdout).toContain(
      '@FILE as the value of --set-rpath, --add-rpath, --add-needed, --remove-needed, --set-interpreter, --interpreter or --output',
    );
    expect(result.stdout).toContain("Exit status 0, or 1 on any failure (a wrong command line included), as patchelf's.");
  });
});

describe('the same results as patchelf', () => {
  it('--shrink-rpath converts DT_RPATH to DT_RUNPATH even when it removes nothing', async () => {
    const dirs = await Promise.all([workDir('shrink-ours', RPATH_LIBRARY), workDir('shrink-patchelf', RPATH_LIBRARY)]);
    for (const dir of dirs)
      expect((await execTool(patchelf, ['--force-rpath', '--set-rpath', '$ORIGIN', join(dir, 'lib.so')])).code).toBe(0);
    const [oursDir, theirsDir] = dirs as [string, string];
    expect((await execTool(patchelf, ['--shrink-rpath', join(theirsDir, 'lib.so')])).code).toBe(0);
    const result = await runCli(['--shrink-rpath', join(oursDir, 'lib.so')]);
    expect(result.code, result.stderr).toBe(0);
    const ours = await readDynamic(join(oursDir, 'lib.so'));
    const theirs = await readDynamic(join(theirsDir, 'lib.so'));
    expect(ours).toEqual(theirs);
    expect(ours === null ? null : tagKind(ours)).toBe('RUNPATH');
  });
});

describe('a tag given twice (no linker writes one): the last is the one read, as the loader and patchelf read it', () => {
  it('--print-rpath and --print-soname print what patchelf prints, and add-runpath keeps what the loader used', async () => {
    const dir = await makeTempDir('twice');
    await mkdir(join(dir, 'a'));
    await mkdir(join(dir, 'b'));
    const lib = await buildLibrary(join(dir, 'b/libtwo.so'), 'libtwo.so');
    await mustExec(patchelf, ['--add-needed', 'libtwo-alias.so', lib]);
    await retagNeeded(lib, 'libtwo-alias.so', { tag: DT.DT_SONAME });
    const prog = await buildProgram(join(dir, 'prog'), { needs: [lib] });
    // --add-needed puts each name first: the entries end as a, b, then the program's own.
    for (const sub of ['b', 'a']) await mustExec(patchelf, ['--add-needed', join(dir, sub), prog]);
    for (const sub of ['a', 'b']) await retagNeeded(prog, join(dir, sub), { tag: DT.DT_RUNPATH });
    expect((await runOn('x86_64', prog, [])).code).toBe(0);
    for (const [flag, file] of [
      ['--print-rpath', prog],
      ['--print-soname', lib],
    ] as const) {
      const [theirs, ours] = [await execTool(patchelf, [flag, file]), await runCli([flag, file])];
      expect({ code: ours.code, stdout: ours.stdout }).toEqual({ code: 0, stdout: theirs.stdout });
    }
    expect((await runCli(['--print-rpath', prog])).stdout).toBe(`${join(dir, 'b')}\n`);
    const added = await runCli(['add-runpath', '/opt/first', prog]);
    expect(added.code, added.stderr).toBe(0);
    expect((await runCli(['--print-rpath', prog])).stdout).toBe(`/opt/first:${join(dir, 'b')}\n`);
    expect((await runOn('x86_64', prog, [])).code).toBe(0);
  });
});

describe('output: silent as patchelf, and lines that say what was done', () => {
  it.each([
    ['--set-rpath', ['--set-rpath', DRIVER_LIB, 'lib.so']],
    ['--add-rpath', ['--add-rpath', DRIVER_LIB, 'lib.so']],
    ['--add-needed', ['--add-needed', 'libcuda.so.1', 'lib.so']],
    ['--remove-rpath', ['--remove-rpath', 'lib.so']],
  ])('%s prints nothing, as patchelf', async (_name, args) => {
    const run = await both('silent', LIBRARY, args);
    expect({ stdout: run.theirs.stdout, stderr: run.theirs.stderr }).toEqual({ stdout: '', stderr: '' });
    expect({ code: run.ours.code, stdout: run.ours.stdout, stderr: run.ours.stderr }).toEqual({ code: 0, stdout: '', stderr: '' });
  });

  it.each([
    ['--debug --add-rpath', ['--debug', '--add-rpath', '/x'], `'/x' appended to the runpath`],
    [
      '--debug --set-rpath of the same value on a DT_RPATH file',
      ['--debug', '--set-rpath', '$ORIGIN:/opt/cuda-patchelf-fixture/lib'],
      'DT_RPATH turned into DT_RUNPATH',
    ],
    ['--debug --remove-rpath', ['--debug', '--remove-rpath'], 'runpath removed'],
  ])('%s: one line on stderr', async (name, args, what) => {
    const dir = await workDir('debug-line', name.includes('DT_RPATH') ? RPATH_LIBRARY : LIBRARY);
    const result = await runCli([...args, 'lib.so'], { cwd: dir });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('');
    expect(stderrLines(result)).toEqual([expect.stringMatching(new RegExp(`^lib\\.so: ${escapeRegExp(what)} ${WRITTEN}$`))]);
  });

  it.each([
    ['add-runpath', ['add-runpath', DRIVER_LIB], `'/run/opengl-driver/lib' prepended to the runpath`],
    ['add-runpath --append', ['add-runpath', '--append', '/x'], `'/x' appended to the runpath`],
    ['set-runpath, shorter', ['set-runpath', '/z'], `runpath set to '/z'`],
    ['remove-runpath', ['remove-runpath', '$ORIGIN'], `'$ORIGIN' removed from the runpath`],
    ['remove-runpath --all', ['remove-runpath', '--all'], 'runpath removed'],
    ['add-needed', ['add-needed', 'libcuda.so.1'], `'libcuda.so.1' added to the needed libraries`],
    ['remove-needed', ['remove-needed', 'libgreet.so.1'], `'libgreet.so.1' removed from the needed libraries`],
    [
      'replace-needed',
      ['replace-needed', 'libgreet.so.1', 'libgreet.so.2'],
      `'libgreet.so.1' replaced by 'libgreet.so.2' in the needed libraries`,
    ],
  ])('%s: the line says what was done, then how it was written', async (_name, args, what) => {
    const dir = await workDir('edit-line', LIBRARY);
    const result = await runCli([...args, 'lib.so'], { cwd: dir });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.split('\n')).toEqual([expect.stringMatching(new RegExp(`^lib\\.so: ${escapeRegExp(what)} ${WRITTEN}$`)), '']);
  });

  it.each([
    ['set-runpath --dry-run', ['set-runpath', '--dry-run', '/z'], "lib.so: runpath set to '/z' (dry run: would be edited in place)"],
    [
      'set-runpath to the value it has',
      ['set-runpath', '$ORIGIN:/opt/cuda-patchelf-fixture/lib'],
      'lib.so: already as asked, nothing written',
    ],
  ])('%s: the line', async (_name, args, line) => {
    const dir = await workDir('edit-line', LIBRARY);
    const result = await runCli([...args, 'lib.so'], { cwd: dir });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe(`${line}\n`);
  });

  it('--json keeps the tier and lists the changes', async () => {
    const dir = await workDir('edit-json', LIBRARY);
    const result = await runCli(['add-runpath', '--json', DRIVER_LIB, 'lib.so'], { cwd: dir });
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toMatchObject([
      { file: 'lib.so', tier: 'append', changes: [`'${DRIVER_LIB}' prepended to the runpath`] },
    ]);
  });
});
