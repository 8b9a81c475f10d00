// What the command line says, read as a user reads it: a mistyped command, a missing argument or a file
// where the command goes is one clear line (and the usage line where arguments are missing); --help lists
// the tree commands first, the exit codes, and for each editor the arguments and options it takes; print
// names an archive; an edit that changes nothing writes nothing; add-runpath --dedupe does what its help
// says; an empty file name in the patchelf-compatible mode is a usage error.

import { copyFile, mkdir, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { fixture, requireTool } from './helpers/fixtures.js';
import { mustExec } from './helpers/exec.js';
import { readDynamic, readelfText } from './helpers/readelf.js';
import { assertCliBuilt, runCli, stderrLines, type CliResult } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { sha256File } from './helpers/tree-tools.js';

const PROGRAM = 'compiled/x86_64/pie-runpath';
const LIBRARY = 'compiled/x86_64/libuser-runpath';

beforeAll(() => {
  assertCliBuilt();
});

/** Help text with its wrapping undone: commander breaks long descriptions at spaces. */
const unwrapped = (result: CliResult): string => result.stdout.replace(/\s+/g, ' ');

/** The exact state of a file: its bytes and its modification time (a write of the same bytes shows). */
async function fileState(path: string): Promise<{ sha256: string; mtimeMs: number }> {
  return { sha256: await sha256File(path), mtimeMs: (await stat(path)).mtimeMs };
}

/** A copy of a fixture with an old modification time, so that any write to it shows. */
async function copyOf(id: string, dir: string, name: string): Promise<string> {
  const path = join(dir, name);
  await copyFile(fixture(id).path, path);
  await utimes(path, new Date('2020-01-01T00:00:00Z'), new Date('2020-01-01T00:00:00Z'));
  return path;
}

describe('usage errors a user meets first', () => {
  it('a mistyped command: one line, with the guess and where to look', async () => {
    const result = await runCli(['aply', '.']);
    expect({ code: result.code, stdout: result.stdout, stderr: stderrLines(result) }).toEqual({
      code: 2,
      stdout: '',
      stderr: ["cuda-patchelf: unknown command 'aply': did you mean apply? (cuda-patchelf --help lists them)"],
    });
  });

  it('a mistyped option: one line with the guess', async () => {
    const result = await runCli(['apply', '--dry-rn', '.']);
    expect({ code: result.code, stderr: stderrLines(result) }).toEqual({
      code: 2,
      stderr: ["cuda-patchelf: unknown option '--dry-rn' (did you mean --dry-run?)"],
    });
  });

  it('a file where the command goes: what the tool takes, and where to look', async () => {
    const dir = await makeTempDir('messages-file');
    const file = await copyOf(LIBRARY, dir, 'f.so');
    const before = await fileState(file);
    const result = await runCli(['f.so'], { cwd: dir });
    expect({ code: result.code, stdout: result.stdout }).toEqual({ code: 2, stdout: '' });
    expect(stderrLines(result)).toEqual([
      "cuda-patchelf: unknown command 'f.so': cuda-patchelf takes a command (apply, check, plan, print, doctor, set-runpath, …) or patchelf's flags (cuda-patchelf --help lists them)",
    ]);
    expect(await fileState(file)).toEqual(before);
  });

  it.each([
    [['apply'], "missing required argument 'dirs'", 'Usage: cuda-patchelf apply [options] <dirs...>'],
    [['check'], "missing required argument 'dirs'", 'Usage: cuda-patchelf check [options] <dirs...>'],
    [
      ['replace-needed', 'libc.so.6'],
      "missing required argument 'new'",
      'Usage: cuda-patchelf replace-needed [options] <old> <new> <files...>',
    ],
  ])('%j without its arguments: the error, then the usage line', async (args, error, usage) => {
    const result = await runCli(args);
    expect({ code: result.code, stdout: result.stdout, stderr: stderrLines(result) }).toEqual({
      code: 2,
      stdout: '',
      stderr: [`cuda-patchelf: ${error}`, usage],
    });
  });
});

describe('--help', () => {
  it('lists apply, check and plan first, then print, doctor and link-driver, then the editors, and the exit codes', async () => {
    const result = await runCli(['--help']);
    expect(result.code).toBe(0);
    const commands = result.stdout
      .split('Commands:\n')[1]
      ?.split('\n\n')[0]
      ?.split('\n')
      .map((line) => /^ {2}(\S+)/.exec(line)?.[1]);
    expect(commands).toEqual([
      'apply',
      'check',
      'plan',
      'print',
      'print-interpreter',
      'doctor',
      'link-driver',
      'set-runpath',
      'add-runpath',
      'remove-runpath',
      'add-needed',
      'remove-needed',
      'replace-needed',
      'set-interpreter',
      'help',
    ]);
    const exitCodes = result.stdout.split('Exit codes:\n')[1]?.split('\n\n')[0]?.split('\n') ?? [];
    expect(exitCodes.map((line) => /^ {2}(\d+) /.exec(line)?.[1]).filter((code) => code !== undefined)).toEqual([
      '0',
      '1',
      '2',
      '3',
      '130',
    ]);
    expect(exitCodes).toContain('  1    check: files that apply would change');
    expect(exitCodes).toContain('  2    a usage error: nothing was read or written');
  });

  it("--jobs says its default as a rule and as this machine's number, not as two numbers", async () => {
    const help = unwrapped(await runCli(['apply', '--help']));
    expect(help).toMatch(
      /--jobs <n> at most N threads patching files at once; never more than the CPUs \(\d+\) or the ELF files waiting \(default: half the CPUs, at least 1: \d+ here; 1: no worker threads; at most 8192\)/,
    );
    expect(help).not.toMatch(/default: \d+, half the CPUs/);
  });

  it('the DT_NEEDED editors take no --force-rpath, the runpath editors do, and every editor describes its arguments', async () => {
    const takes = async (command: string): Promise<{ forceRpath: boolean; arguments: string[] }> => {
      const result = await runCli([command, '--help']);
      expect(result.code, command).toBe(0);
      const section = result.stdout.split('Arguments:\n')[1]?.split('\n\n')[0] ?? '';
      return {
        forceRpath: result.stdout.includes('--force-rpath'),
        arguments: section
          .split('\n')
          .filter((line) => /^ {2}\S/.test(line))
          .map((line) => line.trim().replace(/\s{2,}/, ': ')),
      };
    };
    expect(await takes('add-needed')).toEqual({
      forceRpath: false,
      arguments: [
        'library: the library to add, as DT_NEEDED names it (libfoo.so.1)',
        'files: ELF files to edit (a symbolic link is followed)',
      ],
    });
    expect(await takes('remove-needed')).toEqual({
      forceRpath: false,
      arguments: ['library: the DT_NEEDED name to remove (libfoo.so.1)', 'files: ELF files to edit (a symbolic link is followed)'],
    });
    expect(await takes('replace-needed')).toEqual({
      forceRpath: false,
      arguments: [
        'old: the DT_NEEDED name to rename (libfoo.so.1)',
        'new: the name it becomes',
        'files: ELF files to edit (a symbolic link is followed)',
      ],
    });
    for (const command of ['set-runpath', 'add-runpath', 'remove-runpath']) {
      const help = await takes(command);
      expect(help.forceRpath, command).toBe(true);
      expect(
        help.arguments.every((line) => /^\S+: \S/.test(line)),
        `${command}: ${help.arguments.join(' | ')}`,
      ).toBe(true);
    }
    const refused = await runCli(['add-needed', '--force-rpath', 'libx.so', 'f.so']);
    expect({ code: refused.code, stderr: stderrLines(refused) }).toEqual({
      code: 2,
      stderr: ["cuda-patchelf: unknown option '--force-rpath'"],
    });
  });
});

describe('print and the editors on an archive', () => {
  it('name it as an archive (a static library), and leave it alone', async () => {
    const dir = await makeTempDir('messages-archive');
    await writeFile(join(dir, 'x.c'), 'int x(void) { return 1; }\n');
    await mustExec(requireTool('gcc'), ['-c', '-o', join(dir, 'x.o'), join(dir, 'x.c')]);
    const archive = join(dir, 'libx.a');
    await mustExec(requireTool('ar'), ['rcs', archive, join(dir, 'x.o')]);
    const before = await fileState(archive);
    for (const args of [
      ['print', archive],
      ['set-runpath', '/opt/x', archive],
      ['--set-rpath', '/opt/x', archive],
    ]) {
      const result = await runCli(args);
      expect(result.code, args.join(' ')).toBe(args[0] === '--set-rpath' ? 1 : 3);
      expect(stderrLines(result), args.join(' ')).toEqual([
        `cuda-patchelf: ${archive}: an ar archive (static library), not an ELF file (at offset 0x0)`,
      ]);
    }
    expect(await fileState(archive)).toEqual(before);
  });
});

describe('an edit that changes nothing', () => {
  it('replace-needed A A: says nothing changed and writes nothing, the patchelf-compatible mode neither', async () => {
    const dir = await makeTempDir('messages-replace-same');
    const program = await copyOf(PROGRAM, dir, 'prog');
    const before = await fileState(program);
    const text = await runCli(['replace-needed', 'libc.so.6', 'libc.so.6', program]);
    expect({ code: text.code, stdout: text.stdout, stderr: text.stderr }).toEqual({
      code: 0,
      stdout: `${program}: already as asked, nothing written\n`,
      stderr: '',
    });
    const json = await runCli(['replace-needed', 'libc.so.6', 'libc.so.6', program, '--json']);
    expect(JSON.parse(json.stdout)).toEqual([expect.objectContaining({ tier: 'noop', changes: [], bytesWritten: 0, plannedBytes: 0 })]);
    const patchelf = await runCli(['--replace-needed', 'libc.so.6', 'libc.so.6', program]);
    expect({ code: patchelf.code, stderr: patchelf.stderr }).toEqual({ code: 0, stderr: '' });
    expect(await fileState(program)).toEqual(before);
    // A real rename still renames, version needs included.
    const renamed = await runCli(['replace-needed', 'libc.so.6', 'libc.so.7', program]);
    expect(renamed.stdout).toContain("'libc.so.6' replaced by 'libc.so.7' in the needed libraries");
    expect(await readelfText(['-V'], program)).toMatch(/File: libc\.so\.7/);
  });
});

describe('add-runpath --dedupe', () => {
  it('keeps the first of each directory, as its help says: a directory prepended that the runpath had moves to the front, one appended stays', async () => {
    const help = unwrapped(await runCli(['add-runpath', '--help']));
    expect(help).toContain(
      '--dedupe keep the first of each directory and no empty entry in the result, as apply does: a directory prepended that the runpath had moves to the front, one appended stays where it was',
    );
    const dir = await makeTempDir('messages-dedupe');
    const library = await copyOf(LIBRARY, dir, 'libuser.so');
    expect((await runCli(['set-runpath', '/a:/b::/c', library])).code).toBe(0);
    const prepended = await runCli(['add-runpath', '--dedupe', '/c', library]);
    expect(prepended.code, prepended.stderr).toBe(0);
    expect((await readDynamic(library))?.runpath).toBe('/c:/a:/b');
    const before = await fileState(library);
    const appended = await runCli(['add-runpath', '--dedupe', '--append', '/a', library]);
    expect(appended.stdout).toBe(`${library}: already as asked, nothing written\n`);
    expect(await fileState(library)).toEqual(before);
  });
});

describe('the patchelf-compatible mode', () => {
  it('an empty file name (an unset variable) is a usage error naming what is missing, and no file is edited', async () => {
    const dir = await makeTempDir('messages-empty-name');
    await mkdir(join(dir, 'lib'));
    const library = await copyOf(LIBRARY, join(dir, 'lib'), 'libuser.so');
    const before = await fileState(library);
    for (const args of [
      ['--set-rpath', '/x', ''],
      ['--set-rpath', '/x', 'lib/libuser.so', ''],
    ]) {
      const result = await runCli(args, { cwd: dir });
      expect({ args, code: result.code, stderr: stderrLines(result) }).toEqual({
        args,
        code: 1,
        stderr: ['cuda-patchelf: an empty path was given (an unset variable?); name the files to edit'],
      });
    }
    expect(await fileState(library)).toEqual(before);
  });
});
