// link-driver on the machine that runs the programs: the driver found through the loader's cache
// (/etc/ld.so.cache, as ldconfig writes it) and the kernel driver's version read from
// /sys/module/nvidia/version, both bound in a mount namespace of the test's own; a rerun with the same
// inputs writes nothing (strace sees no write of any kind); a driver upgrade relinks, keeping the
// generation before and removing older ones; and the switch is atomic: a reader looping over
// DEST/lib/libcuda.so.1 while link-driver switches DEST back and forth never misses it.

import { lstat, mkdir, readFile, readlink, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { type CompatReleases, compatReleases, driverRelease, libcudaProbe, loaderCache, onMachine } from './helpers/driver-stand-ins.js';
import { execTool, mustExec } from './helpers/exec.js';
import { compileProgram } from './helpers/compile.js';
import { requireTool } from './helpers/fixtures.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { snapshotTree } from './helpers/tree-tools.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const KERNEL = '580.159.04';
const dir = useTempDir('link-driver-switch');
let driver: string;
let cache: string;
let compat: CompatReleases;

/** The system calls that change a file system: a run that makes none of them wrote nothing. */
const WRITES = 'mkdir,mkdirat,symlink,symlinkat,rename,renameat,renameat2,unlink,unlinkat,rmdir,creat,link,linkat,chmod,fchmodat,truncate';

/** The generations link-driver keeps beside DEST (.NAME-gen-XXXXXX), sorted. */
async function generations(parent: string): Promise<string[]> {
  return (await readdir(parent)).filter((name) => name.startsWith('.opengl-driver-gen-')).sort();
}

beforeAll(async () => {
  assertCliBuilt();
  driver = await driverRelease(join(dir(), 'driver'), KERNEL);
  cache = await loaderCache(join(dir(), 'ld.so.cache'), [driver]);
  compat = await compatReleases(dir());
});

describe("the driver found as the loader finds it, the kernel driver's version as the module says", () => {
  it('through /etc/ld.so.cache and /sys/module/nvidia/version: the libcuda the loader finds is the one linked', async () => {
    const machine = onMachine({ cache, kernel: KERNEL });
    const dest = join(dir(), 'cached', 'opengl-driver');
    await mkdir(join(dir(), 'cached'));
    const result = await runCli(['link-driver', '--cuda-compat', compat.older, dest], { wrapper: machine });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(
      `link-driver: kernel driver ${KERNEL} (/sys/module/nvidia/version); the driver's libraries ${KERNEL} (5, through /etc/ld.so.cache)`,
    );
    // The loader of that machine, asked for libcuda.so.1 by a program without a runpath, finds the file linked.
    const bare = await libcudaProbe(join(dir(), 'cached', 'bare'), join(driver, `libcuda.so.${KERNEL}`), '/nonexistent');
    const [wrapper, ...rest] = machine;
    const listed = await mustExec(wrapper ?? '', [...rest, requireTool('/lib64/ld-linux-x86-64.so.2'), '--list', bare]);
    expect(listed.stdout).toContain(`libcuda.so.1 => ${join(driver, 'libcuda.so.1')} (`);
    expect(await readlink(join(dest, 'lib/libcuda.so.1'))).toBe(join(driver, `libcuda.so.${KERNEL}`));
    for (const name of ['libnvidia-ml.so.1', 'libnvidia-ptxjitcompiler.so.1', 'libnvidia-nvvm.so.4', 'libcudadebugger.so.1', 'libcuda.so'])
      expect(await readlink(join(dest, 'lib', name)), name).toMatch(new RegExp(`^${driver}/lib[\\w-]+\\.so\\.${KERNEL}$`));
  });

  it('without an NVIDIA module loaded, the kernel driver is the driver libraries’ release', async () => {
    const dest = join(dir(), 'no-module', 'opengl-driver');
    await mkdir(join(dir(), 'no-module'));
    const result = await runCli(['link-driver', '--dry-run', dest], { wrapper: onMachine({ cache }) });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`link-driver: kernel driver ${KERNEL} (the name of ${join(driver, `libcuda.so.${KERNEL}`)})`);
  });

  it('a kernel module of another release than the libraries is a warning (the machine was not restarted after an upgrade)', async () => {
    const dest = join(dir(), 'mismatch', 'opengl-driver');
    await mkdir(join(dir(), 'mismatch'));
    const result = await runCli(['link-driver', '--dry-run', dest], { wrapper: onMachine({ cache, kernel: '575.57.08' }) });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(
      `  warning: the kernel driver is 575.57.08 (/sys/module/nvidia/version), its libraries ${KERNEL} (/etc/ld.so.cache): CUDA fails to initialize until the machine restarts`,
    );
  });
});

describe('reruns and upgrades', () => {
  it('a rerun with the same inputs writes nothing: no system call that writes, the directory as it was', async () => {
    const parent = join(dir(), 'rerun');
    await mkdir(parent);
    const dest = join(parent, 'opengl-driver');
    const both = ['--cuda-compat', compat.older, '--cuda-compat', compat.newer];
    const args = ['link-driver', '--from', driver, '--driver-version', KERNEL, ...both, dest];
    expect((await runCli(args)).code).toBe(0);
    const before = await snapshotTree(parent);
    const directoryTime = (await lstat(parent, { bigint: true })).mtimeNs;
    const trace = join(dir(), 'rerun.strace');
    const rerun = await runCli(args, { wrapper: [requireTool('strace'), '-f', '-qq', '-o', trace, '-e', `trace=${WRITES},openat`] });
    expect(rerun.code, rerun.stderr).toBe(0);
    expect(rerun.stdout).toMatch(
      new RegExp(
        `^${dest}: already links the driver's ${KERNEL}, with cuda_compat ${compat.newer} \\(590\\.44\\.01\\) in front \\(\\d+ links\\): nothing written$`,
        'm',
      ),
    );
    const calls = (await readFile(trace, 'utf8')).split('\n').filter((line) => line !== '');
    expect(calls.some((line) => line.includes('openat('))).toBe(true);
    // Opening to read, and names that are not there, write nothing.
    expect(calls.filter((line) => !/openat\(.*O_RDONLY/.test(line) && !/ = -1 ENOENT/.test(line) && !/^\d+ \+\+\+|---/.test(line))).toEqual(
      [],
    );
    expect(await snapshotTree(parent)).toEqual(before);
    expect((await lstat(parent, { bigint: true })).mtimeNs).toBe(directoryTime);
  });

  it('after a driver upgrade a rerun relinks; the generation before is kept, older ones go', async () => {
    const upgrade = '590.48.01';
    const host = join(dir(), 'upgrade', 'host');
    await driverRelease(host, KERNEL);
    const dest = join(dir(), 'upgrade', 'opengl-driver');
    const link = (kernel: string) =>
      runCli(['link-driver', '--from', host, '--driver-version', kernel, '--cuda-compat', compat.newer, dest]);
    expect((await link(KERNEL)).code).toBe(0);
    const first = await readlink(dest);
    const probe = await libcudaProbe(join(dir(), 'upgrade', 'probe'), join(host, `libcuda.so.${KERNEL}`), join(dest, 'lib'));
    expect((await execTool(probe, [])).stdout).toBe('libcuda 590.44.01 compat\n');

    // The upgrade, as a package manager does it: the new release's files, the links moved, the old files gone.
    for (const name of await readdir(host)) await rm(join(host, name));
    await driverRelease(host, upgrade);
    const upgraded = await link(upgrade);
    expect(upgraded.code, upgraded.stderr).toBe(0);
    expect(upgraded.stdout).toContain(
      `cuda_compat ${compat.newer}: left out: NVIDIA's rule: compat 590.44.01 is not newer than the kernel driver ${upgrade}`,
    );
    const second = await readlink(dest);
    expect(second).not.toBe(first);
    expect(await readlink(join(dest, 'lib/libcuda.so.1'))).toBe(join(host, `libcuda.so.${upgrade}`));
    expect(await readlink(join(dest, 'lib/libnvidia-ml.so.1'))).toBe(join(host, `libnvidia-ml.so.${upgrade}`));
    expect((await execTool(probe, [])).stdout).toBe(`libcuda ${upgrade} driver\n`);
    expect(await generations(join(dir(), 'upgrade'))).toEqual([first, second].sort());

    // A third generation (decided for a 580 kernel driver, on which the compat goes in front): the first
    // goes, the second (the one replaced) stays.
    const third = await link(KERNEL);
    expect(third.code).toBe(0);
    expect(await readlink(join(dest, 'lib/libcuda.so.1'))).toBe(join(compat.newer, 'compat/libcuda.so.590.44.01'));
    expect(await generations(join(dir(), 'upgrade'))).toEqual([second, await readlink(dest)].sort());
  });

  it('a link made by something else (NixOS’ tmpfiles link to a store path) is replaced; the directory it named is left alone', async () => {
    const parent = join(dir(), 'foreign');
    await mkdir(join(parent, 'store-graphics-drivers/lib'), { recursive: true });
    await symlink(join(parent, 'store-graphics-drivers'), join(parent, 'opengl-driver'));
    const result = await runCli(['link-driver', '--from', driver, '--driver-version', KERNEL, join(parent, 'opengl-driver')]);
    expect(result.code, result.stderr).toBe(0);
    expect(await readlink(join(parent, 'opengl-driver'))).toMatch(/^\.opengl-driver-gen-\w{6}$/);
    expect((await lstat(join(parent, 'store-graphics-drivers/lib'))).isDirectory()).toBe(true);
  });
});

describe('the switch is atomic', () => {
  it('a reader opening DEST/lib/libcuda.so.1 in a loop while link-driver switches DEST 30 times never misses it', async () => {
    const parent = join(dir(), 'atomic');
    await mkdir(parent);
    const dest = join(parent, 'opengl-driver');
    const reader = join(parent, 'reader');
    await writeFile(
      `${reader}.c`,
      [
        '#include <fcntl.h>',
        '#include <stdio.h>',
        '#include <string.h>',
        '#include <unistd.h>',
        '/* Opens argv[1] and reads its ELF magic until argv[2] exists: how often it could, and could not. */',
        'int main(int argc, char **argv) {',
        '  long seen = 0, missed = 0;',
        '  char magic[4];',
        '  if (argc != 3) return 2;',
        '  while (access(argv[2], F_OK) != 0) {',
        '    int fd = open(argv[1], O_RDONLY);',
        '    if (fd >= 0 && read(fd, magic, 4) == 4 && memcmp(magic, "\\177ELF", 4) == 0) seen++; else missed++;',
        '    if (fd >= 0) close(fd);',
        '  }',
        '  printf("%ld %ld\\n", seen, missed);',
        '  return 0;',
        '}',
      ].join('\n'),
    );
    await compileProgram(reader, `${reader}.c`);
    const base = ['link-driver', '--from', driver, '--driver-version', KERNEL];
    expect((await runCli([...base, dest])).code).toBe(0);
    const stop = join(parent, 'stop');
    const reading = execTool(reader, [join(dest, 'lib/libcuda.so.1'), stop], { timeoutMs: 300_000 });
    const targets = new Set<string>();
    for (let run = 0; run < 30; run++) {
      // Back and forth: with the newer compat in front, then the driver alone; each run switches.
      const switched = await runCli([...base, ...(run % 2 === 0 ? ['--cuda-compat', compat.newer] : []), dest]);
      expect(switched.code, switched.stderr).toBe(0);
      expect(switched.stdout).toMatch(/, in \.opengl-driver-gen-\w{6}$/m);
      targets.add(await readlink(join(dest, 'lib/libcuda.so.1')));
    }
    await writeFile(stop, '');
    const read = await reading;
    expect(read.code, read.stderr).toBe(0);
    const [seen, missed] = read.stdout.trim().split(' ').map(Number);
    expect(missed).toBe(0);
    expect(seen).toBeGreaterThan(1000);
    expect([...targets].sort()).toEqual([join(driver, `libcuda.so.${KERNEL}`), join(compat.newer, 'compat/libcuda.so.590.44.01')].sort());
    // Two generations are left: the one DEST links to, and the one it replaced.
    expect(await generations(parent)).toHaveLength(2);
  });
});
