// --output, in the patchelf-compatible mode and in the editing commands alike: the result goes to a
// regular file, made as patchelf makes it (mode 0777 less the umask; an existing file keeps its mode
// and inode), or to the input itself when --output names it. A device, FIFO or socket, or a link to
// one, is refused before anything is written, and it is still there afterwards: the copy must never
// delete what it failed to write into. A link to nothing is refused too, as cp refuses to write through
// one (patchelf makes the link's target): nothing is made where a link points. And a write that fails
// leaves no part of a file: a new file is removed, an existing one is left empty.

import { chmod, copyFile, lstat, readFile, readlink, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { fixture, requireTool } from './helpers/fixtures.js';
import { execTool } from './helpers/exec.js';
import { assertCliBuilt, runCli, stderrLines } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { readDynamic } from './helpers/readelf.js';

const LIBRARY = 'compiled/x86_64/libuser-runpath';
const ORIGINAL_RUNPATH = '$ORIGIN:/opt/cuda-patchelf-fixture/lib';

/** The same request in both syntaxes: patchelf's flags and the set-runpath command. */
const SYNTAXES: Array<{ name: string; args: (output: string) => string[]; failure: number }> = [
  { name: 'patchelf flags', args: (output) => ['--set-rpath', '/x', '--output', output, 'lib.so'], failure: 1 },
  { name: 'set-runpath', args: (output) => ['set-runpath', '/x', 'lib.so', '--output', output], failure: 3 },
];

let mkfifo: string;

beforeAll(() => {
  assertCliBuilt();
  requireTool('readelf');
  mkfifo = requireTool('mkfifo');
});

async function workDir(label: string): Promise<string> {
  const dir = await makeTempDir(label);
  await copyFile(fixture(LIBRARY).path, join(dir, 'lib.so'));
  return dir;
}

async function runpathOf(file: string): Promise<string | null | undefined> {
  return (await readDynamic(file))?.runpath;
}

describe.each(SYNTAXES)('--output ($name)', ({ args, failure }) => {
  it.each([
    ['a link to a character device', async (dir: string) => symlink('/dev/null', join(dir, 'out')), 'a character device'],
    ['a FIFO', async (dir: string) => void (await execTool(mkfifo, [join(dir, 'out')])), 'a FIFO'],
    ['a directory', async (dir: string) => void (await execTool('mkdir', [join(dir, 'out')])), 'a directory'],
  ])('%s: refused in one line, left there, the input untouched', async (_name, make, kind) => {
    const dir = await workDir('output-special');
    await make(dir);
    const before = await lstat(join(dir, 'out'));
    const result = await runCli(args('out'), { cwd: dir });
    expect(result.code, result.stderr).toBe(failure);
    expect(stderrLines(result)).toEqual([
      `cuda-patchelf: out: the output file is ${kind}: --output names a regular file or a new one; left alone`,
    ]);
    const after = await lstat(join(dir, 'out'));
    expect({ ino: after.ino, mode: after.mode }).toEqual({ ino: before.ino, mode: before.mode });
    if (after.isSymbolicLink()) expect(await readlink(join(dir, 'out'))).toBe('/dev/null');
    expect((await stat('/dev/null')).isCharacterDevice()).toBe(true);
    expect(Buffer.compare(await readFile(join(dir, 'lib.so')), await readFile(fixture(LIBRARY).path))).toBe(0);
  });

  it('a symbolic link to nothing: refused in one line, no file made where it points, the link left as it was', async () => {
    const dir = await workDir('output-dangling');
    await symlink('target.so', join(dir, 'out'));
    const result = await runCli(args('out'), { cwd: dir });
    expect(result.code, result.stderr).toBe(failure);
    expect(stderrLines(result)).toEqual([
      'cuda-patchelf: out: the output file is a symbolic link to nothing: --output names a regular file or a new one; left alone',
    ]);
    expect(await readlink(join(dir, 'out'))).toBe('target.so');
    await expect(lstat(join(dir, 'target.so'))).rejects.toThrow(/ENOENT/);
    expect(Buffer.compare(await readFile(join(dir, 'lib.so')), await readFile(fixture(LIBRARY).path))).toBe(0);
  });

  // RLIMIT_FSIZE of 4 blocks (2 KiB in dash) with SIGXFSZ ignored: writes past it fail with EFBIG, after
  // the first 2 KiB of the copy went in.
  const fileSizeLimited = ['sh', '-c', 'ulimit -f 4; trap "" XFSZ; exec "$0" "$@"'];

  it('a write that fails part way: the new file it made is removed', async () => {
    const dir = await workDir('output-fails-new');
    const result = await runCli(args('out.so'), { cwd: dir, wrapper: fileSizeLimited });
    expect(result.code, result.stderr).toBe(failure);
    expect(stderrLines(result)).toEqual([
      expect.stringMatching(/^cuda-patchelf: out\.so: cannot write the output file: .*(EFBIG|too large)/),
    ]);
    await expect(lstat(join(dir, 'out.so'))).rejects.toThrow(/ENOENT/);
    expect(Buffer.compare(await readFile(join(dir, 'lib.so')), await readFile(fixture(LIBRARY).path))).toBe(0);
  });

  it('a write that fails part way: an existing file keeps its inode and is left empty, not half written', async () => {
    const dir = await workDir('output-fails-existing');
    await writeFile(join(dir, 'out.so'), 'old contents');
    const before = await stat(join(dir, 'out.so'));
    const result = await runCli(args('out.so'), { cwd: dir, wrapper: fileSizeLimited });
    expect(result.code, result.stderr).toBe(failure);
    expect(stderrLines(result)).toEqual([
      expect.stringMatching(/^cuda-patchelf: out\.so: cannot write the output file: .*(EFBIG|too large)/),
    ]);
    const after = await stat(join(dir, 'out.so'));
    expect({ ino: after.ino, size: after.size }).toEqual({ ino: before.ino, size: 0 });
  });

  it("a new file: mode 0777 less the umask, not the input's (set-user-ID and read-only dropped)", async () => {
    const dir = await workDir('output-mode');
    await chmod(join(dir, 'lib.so'), 0o4555);
    const result = await runCli(args('out.so'), { cwd: dir, wrapper: ['sh', '-c', 'umask 027; exec "$0" "$@"'] });
    expect(result.code, result.stderr).toBe(0);
    expect((await stat(join(dir, 'out.so'))).mode & 0o7777).toBe(0o750);
    expect(await runpathOf(join(dir, 'out.so'))).toBe('/x');
    expect(await runpathOf(join(dir, 'lib.so'))).toBe(ORIGINAL_RUNPATH);
  });

  it('an existing file keeps its mode and inode, and is written through a link to it', async () => {
    const dir = await workDir('output-existing');
    await writeFile(join(dir, 'out.so'), 'old contents, longer than nothing');
    await chmod(join(dir, 'out.so'), 0o600);
    await symlink('out.so', join(dir, 'link.so'));
    const before = await stat(join(dir, 'out.so'));
    const result = await runCli(args('link.so'), { cwd: dir });
    expect(result.code, result.stderr).toBe(0);
    const after = await stat(join(dir, 'out.so'));
    expect({ ino: after.ino, mode: after.mode & 0o7777 }).toEqual({ ino: before.ino, mode: 0o600 });
    expect((await lstat(join(dir, 'link.so'))).isSymbolicLink()).toBe(true);
    expect(await runpathOf(join(dir, 'out.so'))).toBe('/x');
  });

  it('the input itself, by its name or through a link: edited in place', async () => {
    for (const output of ['lib.so', 'self-link.so']) {
      const dir = await workDir('output-self');
      await symlink('lib.so', join(dir, 'self-link.so'));
      const result = await runCli(args(output), { cwd: dir });
      expect(result.code, `${output}: ${result.stderr}`).toBe(0);
      expect(await runpathOf(join(dir, 'lib.so')), output).toBe('/x');
    }
  });

  it('an empty name: a usage error, nothing written', async () => {
    const dir = await workDir('output-empty');
    const result = await runCli(args(''), { cwd: dir });
    expect(result.code).toBe(failure === 1 ? 1 : 2);
    expect(stderrLines(result)).toEqual(['cuda-patchelf: --output needs a file name']);
    expect(await runpathOf(join(dir, 'lib.so'))).toBe(ORIGINAL_RUNPATH);
  });
});
