// The command line as a user meets it, each case as it was run: --auto-patchelf without an interpreter
// says once what is missing and how to pass it; a --libs path that does not exist is a usage error;
// the summary counts the missing libraries and names libc's directory, in proper plurals; a library
// named through a symbolic link is patched; a file named that is not ELF is bad input (exit 3); check
// and doctor refuse an empty tree; doctor run from / shows an absolute path as it was given; a Ctrl-C
// that comes when every file is done says so and leaves the exit code to the work.

import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runCli as runCommandTree } from '../src/cli/program.js';
import { CACHE_DIR, requireTool } from './helpers/fixtures.js';
import { readDynamic } from './helpers/readelf.js';
import { assertCliBuilt, runCli, stderrLines } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { copyTree, sha256File } from './helpers/tree-tools.js';

/** A compiled x86_64 tree: bin/prog, which needs lib/libgreet.so.1 (and libc). */
const FIXTURE_TREE = join(CACHE_DIR, 'compiled', 'x86_64', 'pie-runpath');

let work = '';
let copies = 0;
async function treeCopy(): Promise<string> {
  const tree = join(work, `tree-${++copies}`);
  await copyTree(FIXTURE_TREE, tree);
  return tree;
}

beforeAll(async () => {
  assertCliBuilt();
  requireTool('readelf');
  work = await makeTempDir('cli-consistency');
});

describe('--auto-patchelf as a user meets it', () => {
  it('without --interpreter: one line for glibc’s libraries and what to pass, the count in the summary, exit 3', async () => {
    // bin/prog needs libc.so.6; lib/libgreet.so.1 needs nothing.
    const tree = await treeCopy();
    const result = await runCli(['plan', tree, '--no-driver', '--auto-patchelf']);
    expect(result.code).toBe(3);
    const glibc = stderrLines(result).filter((line) => line.includes('libc.so.6'));
    expect(glibc).toEqual([
      "cuda-patchelf: 1 file needs glibc's libraries (libc.so.6), which --auto-patchelf finds in libc's directory only: give the " +
        "target's dynamic loader, --interpreter FILE (libc's directory is beside it; in a Nix build, " +
        '$(cat $NIX_BINTOOLS/nix-support/dynamic-linker)), or --libc-dir DIR',
    ]);
    expect(result.stdout).toMatch(
      / · 0 failed · 1 missing library in 1 file · 0 bytes written · no libc directory \(--interpreter names one\)$/m,
    );
  });

  it('with it: nothing missing, and the summary names libc’s directory (Debian’s holds more than glibc)', async () => {
    const tree = await treeCopy();
    const result = await runCli(['plan', tree, '--no-driver', '--auto-patchelf', '--interpreter', '/lib64/ld-linux-x86-64.so.2']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/ · 0 failed · 0 bytes written · glibc's own libraries in \/usr\/lib\/x86_64-linux-gnu$/m);
  });

  it('one missing library in one file: singular words', async () => {
    const tree = await treeCopy();
    const interpreter = ['--interpreter', '/lib64/ld-linux-x86-64.so.2'];
    await writeFile(join(tree, 'lib', 'libgreet.so.1'), await readFile(join(tree, 'lib', 'libgreet.so.1')));
    const result = await runCli(['check', join(tree, 'bin'), '--no-driver', '--auto-patchelf', ...interpreter]);
    expect(result.code).toBe(3);
    expect(stderrLines(result)).toEqual([`cuda-patchelf: ${join(tree, 'bin', 'prog')}: library libgreet.so.1 not found`]);
    expect(result.stdout).toContain('cuda-patchelf check: 1 missing library in 1 file, no other file needs patching');
  });

  it('a --libs path that does not exist is a usage error, before anything is read', async () => {
    const tree = await treeCopy();
    const result = await runCli(['apply', tree, '--auto-patchelf', '--libs', join(work, 'nonexistent')]);
    expect(result.code).toBe(2);
    expect(stderrLines(result)).toEqual([`cuda-patchelf: ${join(work, 'nonexistent')}: --libs: no such directory or file`]);
    expect(await readDynamic(join(tree, 'bin', 'prog'))).toEqual(await readDynamic(join(FIXTURE_TREE, 'bin', 'prog')));
  });
});

describe('the trees and files named', () => {
  it('a library named through a symbolic link is patched (the link followed, as a tree named through one is)', async () => {
    const tree = await treeCopy();
    const link = join(work, `libgreet-link-${copies}.so`);
    await symlink(join(tree, 'lib', 'libgreet.so.1'), link);
    const result = await runCli(['apply', link]);
    expect(result.code, result.stderr).toBe(0);
    expect((await readDynamic(join(tree, 'lib', 'libgreet.so.1')))?.runpath).toMatch(/^\/run\/opengl-driver\/lib(:|$)/);
  });

  it('a file named that is not ELF: one line saying what it is, exit 3, for apply and check alike', async () => {
    const text = join(work, 'notes.txt');
    await writeFile(text, 'not a program\n');
    const before = await sha256File(text);
    for (const command of ['apply', 'check']) {
      const result = await runCli([command, text]);
      expect(result.code, command).toBe(3);
      expect(stderrLines(result)).toEqual([expect.stringMatching(new RegExp(`^cuda-patchelf: ${text}: not an ELF file`))]);
    }
    expect(await sha256File(text)).toBe(before);
  });

  it('check and doctor refuse an empty directory (exit 2): a gate that checked nothing must not pass', async () => {
    const empty = join(work, 'empty');
    await mkdir(empty);
    for (const command of ['check', 'doctor']) {
      const result = await runCli([command, empty]);
      expect(result.code, command).toBe(2);
      expect(stderrLines(result)).toEqual([
        `cuda-patchelf: ${empty}: holds no file: ${command} has nothing to check there (a mistyped path?)`,
      ]);
    }
  });

  it('doctor run from / shows an absolute path as it was given', async () => {
    const tree = await treeCopy();
    const result = await runCli(['doctor', join(tree, 'bin', 'prog')], { cwd: '/' });
    expect(result.stdout).toContain(`\n${join(tree, 'bin', 'prog')}: program, x86_64`);
  });
});

describe('Ctrl-C when every file is done', () => {
  it('says so, and the exit code is the work’s (0), not 130', async () => {
    const tree = await treeCopy();
    let out = '';
    let err = '';
    // The Ctrl-C comes as the command lets go of it: after the last file, before the process ends.
    const code = await runCommandTree(['apply', tree], {
      out: (line) => {
        out += `${line}\n`;
      },
      err: (line) => {
        err += `${line}\n`;
      },
      errRaw: () => undefined,
      setExitCode: () => undefined,
      stderrIsTty: false,
      cpuCount: 1,
      host: { cwd: process.cwd(), arch: process.arch },
      catchInterrupt: (onInterrupt) => () => onInterrupt(),
    });
    expect(code, err).toBe(0);
    expect(out).toMatch(/^cuda-patchelf apply: 2 visited · 2 patched/m);
    expect(err).toBe('cuda-patchelf apply: Ctrl-C came when every file was done: nothing was left undone\n');
  });
});
