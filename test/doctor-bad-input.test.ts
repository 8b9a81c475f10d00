// doctor on input it cannot use: each case is one line on stderr naming the file, never a stack trace,
// and the documented exit code — 2 when the command line is wrong (nothing was diagnosed), 3 when
// files could not be read (the rest is still reported).

import { chmod, copyFile, mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mustExec } from './helpers/exec.js';
import { fixture, sysroot } from './helpers/fixtures.js';
import { ldCacheBytes } from './helpers/doctor-ld-cache-writer.js';
import { doctorJson } from './helpers/doctor-run.js';
import { mirrorInto } from './helpers/doctor-root.js';
import { buildProgram } from './helpers/doctor-trees.js';
import { assertCliBuilt, runCli, stderrLines, type CliResult } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';

let t: string;
let root: string;
const program = (): string => join(root, 'opt/app/bin/prog');

/** One `cuda-patchelf:` line on stderr, nothing that looks like a stack trace. */
function expectOneLine(result: CliResult, code: number, ...parts: string[]): void {
  expect(result.code, result.stderr).toBe(code);
  const lines = stderrLines(result);
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(/^cuda-patchelf: /);
  for (const part of parts) expect(lines[0]).toContain(part);
  expect(result.stderr).not.toMatch(/\n\s+at /);
}

async function withCache(bytes: Buffer | null, work: () => Promise<void>): Promise<void> {
  const cache = join(root, 'etc/ld.so.cache');
  await rm(cache, { recursive: true, force: true });
  if (bytes === null) await mkdir(cache);
  else await writeFile(cache, bytes);
  try {
    await work();
  } finally {
    await rm(cache, { recursive: true, force: true });
  }
}

beforeAll(async () => {
  assertCliBuilt();
  t = await makeTempDir('doctor-bad');
  root = join(t, 'root');
  await mirrorInto(root, [sysroot('aarch64')], '/');
  await mkdir(join(root, 'etc'), { recursive: true });
  await buildProgram(join(root, 'opt/app/bin/prog'), { arch: 'aarch64' });
}, 120_000);

afterAll(async () => {
  if (t !== undefined) await rm(t, { recursive: true, force: true });
});

describe('ld.so.cache that cannot be used: exit 3, the cache named', () => {
  const good = ldCacheBytes([{ key: 'libx.so', value: '/opt/x/libx.so', flags: 0x0a03 }], 'new');

  it('a directory where the cache should be', async () => {
    await withCache(null, async () =>
      expectOneLine(await runCli(['doctor', '--root', root, program()]), 3, join(root, 'etc/ld.so.cache'), 'not a regular file'),
    );
  });

  it('a cache that cannot be opened (permissions; not when running as root, who reads anything)', async () => {
    if (process.getuid?.() === 0) return;
    await withCache(good, async () => {
      await chmod(join(root, 'etc/ld.so.cache'), 0o000);
      expectOneLine(await runCli(['doctor', '--root', root, program()]), 3, join(root, 'etc/ld.so.cache'), 'permission denied');
    });
  });

  it('truncated: the header announces more entries than the file holds', async () => {
    await withCache(good.subarray(0, 60), async () =>
      expectOneLine(
        await runCli(['doctor', '--root', root, program()]),
        3,
        join(root, 'etc/ld.so.cache'),
        'truncated',
        'ld.so ignores this cache',
      ),
    );
  });

  it('not a cache at all, and a cache of the other byte order', async () => {
    await withCache(Buffer.from('hello, not a cache\n'.repeat(8)), async () =>
      expectOneLine(await runCli(['doctor', '--root', root, program()]), 3, 'not an ld.so cache'),
    );
    const bigEndian = Buffer.from(good);
    bigEndian.writeUInt8(3, 28);
    await withCache(bigEndian, async () => expectOneLine(await runCli(['doctor', '--root', root, program()]), 3, 'big-endian'));
  });

  it('the old format is no error: the loader reads it, and so does doctor', async () => {
    await withCache(ldCacheBytes([{ key: 'libx.so', value: '/opt/x/libx.so', flags: 0x0a03 }], 'old'), async () => {
      const { json, cli } = await doctorJson(['--root', root, program()]);
      expect(cli.code).toBe(0);
      expect(json.files[0]?.loader.cache.format).toBe('old');
    });
  });

  it('JSON: the error is in the report, and said once however many files need the cache', async () => {
    await mkdir(join(root, 'opt/two/bin'), { recursive: true });
    await buildProgram(join(root, 'opt/two/bin/a'), { arch: 'aarch64' });
    await buildProgram(join(root, 'opt/two/bin/b'), { arch: 'aarch64' });
    await withCache(good.subarray(0, 60), async () => {
      const result = await runCli(['doctor', '--json', '--root', root, join(root, 'opt/two')]);
      expect(result.code).toBe(3);
      expect(stderrLines(result)).toHaveLength(1);
      const report = JSON.parse(result.stdout) as { errors: { file: string; error: { kind: string; message: string } }[] };
      expect(report.errors.map((e) => e.error.kind)).toEqual(['format', 'format']);
    });
  });
});

describe('paths named that cannot be walked: a usage error (exit 2), as for apply', () => {
  it('a symbolic link loop', async () => {
    const loop = join(t, 'loop');
    await symlink(loop, loop);
    expectOneLine(await runCli(['doctor', loop]), 2, loop, 'too many levels of symbolic links');
  });

  it('a path that does not exist', async () => {
    expectOneLine(await runCli(['doctor', join(t, 'missing')]), 2, join(t, 'missing'), 'no such file');
  });

  it('a FIFO', async () => {
    const fifo = join(t, 'named-fifo');
    await mustExec('mkfifo', [fifo]);
    expectOneLine(await runCli(['doctor', fifo]), 2, fifo, 'cannot walk a FIFO');
  });

  it('an empty directory: nothing to check is no answer', async () => {
    const empty = join(t, 'empty-tree');
    await mkdir(empty, { recursive: true });
    expectOneLine(await runCli(['doctor', empty]), 2, empty, 'holds no file');
  });
});

describe('files that cannot be read: exit 3', () => {
  it('a truncated ELF file among good ones: that file named, the others reported', async () => {
    const tree = join(t, 'truncated-tree');
    await buildProgram(join(tree, 'bin/good'));
    await mkdir(join(tree, 'lib'), { recursive: true });
    // The ELF identification of a 64-bit library and nothing after it.
    await writeFile(join(tree, 'lib/libbroken.so'), Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0]));
    const result = await runCli(['doctor', tree]);
    expectOneLine(result, 3, join(tree, 'lib/libbroken.so'));
    expect(result.stdout).toContain(`${join(tree, 'bin/good')}: program, x86_64`);
  });

  it('an ELF file of a machine doctor does not emulate', async () => {
    const ppc = fixture('compiled/ppc64/libgreet').path;
    expectOneLine(await runCli(['doctor', ppc]), 3, ppc, 'x86_64, aarch64 and i386');
  });

  it('an aarch64 file without --root on another machine: the loader is not there, and --root is named', async () => {
    if (process.arch === 'arm64') return;
    const arm = fixture('compiled/aarch64-64k/libgreet').path;
    expectOneLine(await runCli(['doctor', arm]), 3, '/lib/ld-linux-aarch64.so.1: no dynamic loader there (ENOENT)', '--root');
  });

  it('a tree of aarch64 files without --root: the missing loader is said once, and the JSON names every file', async () => {
    if (process.arch === 'arm64') return;
    const tree = join(t, 'aarch64-tree');
    await mkdir(tree, { recursive: true });
    const names = ['liba.so', 'libb.so', 'libc.so'];
    for (const name of names) await copyFile(fixture('compiled/aarch64-64k/libgreet').path, join(tree, name));
    expectOneLine(await runCli(['doctor', tree]), 3, '/lib/ld-linux-aarch64.so.1: no dynamic loader there (ENOENT)', '--root');
    const json = await runCli(['doctor', '--json', tree]);
    expect(json.code).toBe(3);
    const report = JSON.parse(json.stdout) as { errors: { file: string; error: { kind: string; message: string; about?: string } }[] };
    expect(report.errors.map((e) => e.file).sort()).toEqual(names.map((name) => join(tree, name)));
    for (const { error } of report.errors) {
      expect(error).toEqual({
        kind: 'io',
        message: 'no dynamic loader there (ENOENT): aarch64 files need --root with an aarch64 system root',
        offset: null,
        about: '/lib/ld-linux-aarch64.so.1',
      });
    }
  });
});

describe('a wrong command line: exit 2, nothing diagnosed', () => {
  it('a system root without a dynamic loader', async () => {
    const empty = join(t, 'not-a-root');
    await mkdir(join(empty, 'usr/lib'), { recursive: true });
    expectOneLine(await runCli(['doctor', '--root', empty, empty]), 2, empty, 'no dynamic loader');
  });

  it('--root that is not a directory, and a path outside the root', async () => {
    expectOneLine(await runCli(['doctor', '--root', join(t, 'nowhere'), program()]), 2, 'not a directory');
    expectOneLine(await runCli(['doctor', '--root', root, t]), 2, 'outside --root');
  });

  it('a driver version that is not one, both driver options, a --driver-lib that is not a libcuda', async () => {
    expectOneLine(await runCli(['doctor', '--driver-version', 'latest', program()]), 2, '--driver-version');
    expectOneLine(await runCli(['doctor', '--driver-version', '550.54.14', '--driver-lib', program(), program()]), 2, 'give one');
    expectOneLine(await runCli(['doctor', '--driver-lib', join(t, 'nope.so'), program()]), 2, '--driver-lib');
    expectOneLine(await runCli(['doctor', '--driver-lib', program(), program()]), 2, 'no driver version');
  });

  it('an empty path', async () => {
    expectOneLine(await runCli(['doctor', '']), 2, 'empty path');
  });
});

describe('what is not an error', () => {
  it('a program whose interpreter does not exist is a finding (exit 1): the kernel cannot start it', async () => {
    const prog = await buildProgram(join(t, 'nointerp/prog'), {
      extra: ['-Wl,--dynamic-linker=/nix/store/00000000000000000000000000000000-glibc/lib/ld-linux-x86-64.so.2'],
    });
    const { json, cli } = await doctorJson([prog]);
    expect(cli.code).toBe(1);
    expect(json.files[0]?.interpreter).toEqual({
      path: '/nix/store/00000000000000000000000000000000-glibc/lib/ld-linux-x86-64.so.2',
      found: false,
    });
    expect(json.files[0]?.findings.map((f) => f.code)).toEqual(['interpreter-missing']);
  });

  it('files that are not dynamic ELF files are counted and skipped in a tree; one named directly is a finding (exit 1)', async () => {
    const tree = join(t, 'mixed-files');
    await mkdir(tree, { recursive: true });
    await writeFile(join(tree, 'README'), 'text\n');
    await writeFile(join(tree, 'empty.so'), '');
    const inTree = await doctorJson([tree]);
    expect(inTree.cli.code).toBe(0);
    const { json, cli } = await doctorJson([tree, fixture('compiled/x86_64/static').path]);
    expect(cli.code).toBe(1);
    expect(json.summary.map((s) => [s.files, s.skipped, s.unreadable, s.errors])).toEqual([
      [0, 2, 0, 0],
      [0, 1, 0, 1],
    ]);
    expect(json.notDynamic.map((named) => [named.kind, named.findings.map((f) => f.code)])).toEqual([['static', ['not-dynamic-elf']]]);
  });
});
