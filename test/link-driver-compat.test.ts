// link-driver and NVIDIA's rule, case by case, with stand-in driver and compat libraries built as the
// real ones are laid out (the driver 580.159.04; cuda_compat packages with and without the note): the
// newest compat the rule allows goes in front, its libraries (libcuda first) replacing the driver's of
// the same name; when none is allowed the driver's stand alone, and one line per candidate says why.
// Each case is proven by the loader: a program whose runpath is DEST/lib loads the libcuda that
// link-driver chose (it prints whose it got), and `ld.so --list` finds libcuda.so.1 in DEST/lib.

import { mkdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildStandIn, compatPackage, driverRelease, libcudaProbe, NOTE_580, noteListing } from './helpers/driver-stand-ins.js';
import { execTool } from './helpers/exec.js';
import { ldList } from './helpers/fixtures.js';
import { assertCliBuilt, runCli, type CliResult } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const KERNEL = '580.159.04';
const dir = useTempDir('link-driver-compat');
let driver: string;
const compat: Record<string, string> = {};

interface Linked {
  readonly result: CliResult;
  readonly dest: string;
  /** What the program that finds libcuda.so.1 in DEST/lib printed: "libcuda VERSION driver|compat". */
  readonly loaded: string;
}

/** link-driver DEST with the host driver, the kernel driver KERNEL and these candidates; and the loader's answer. */
async function linkWith(name: string, candidates: readonly string[]): Promise<Linked> {
  const dest = join(dir(), name, 'opengl-driver');
  await mkdir(join(dir(), name));
  const args = ['link-driver', '--from', driver, '--driver-version', KERNEL, ...candidates.flatMap((c) => ['--cuda-compat', c]), dest];
  const result = await runCli(args);
  expect(result.code, result.stderr).toBe(0);
  const probe = await libcudaProbe(join(dir(), name, 'probe'), join(driver, `libcuda.so.${KERNEL}`), join(dest, 'lib'));
  expect(await ldList(probe, 'x86_64')).toContain(`libcuda.so.1 => ${join(dest, 'lib/libcuda.so.1')} (`);
  const run = await execTool(probe, []);
  expect(run.code, run.stderr).toBe(0);
  return { result, dest, loaded: run.stdout.trim() };
}

/** The candidate lines of the text report: "cuda_compat DIR: in front of the driver|left out: WHY". */
const candidateLines = (result: CliResult): string[] => result.stdout.split('\n').filter((line) => line.startsWith('  cuda_compat '));

beforeAll(async () => {
  assertCliBuilt();
  driver = await driverRelease(join(dir(), 'driver'), KERNEL);
  const packages: [string, string, object | null][] = [
    ['older', '580.95.05', NOTE_580],
    ['newer-listed', '590.44.01', noteListing([535, 550, 570, 575, 580, 590], '13.1')],
    ['newer-unlisted', '590.44.01', noteListing([535, 550, 570, 575, 590], '13.1')],
    ['also-listed', '585.20.01', noteListing([570, 575, 580, 585], '13.0')],
    ['no-note-newer-major', '590.44.01', null],
    ['no-note-same-major', '580.200.01', null],
  ];
  for (const [name, version, note] of packages) compat[name] = await compatPackage(join(dir(), `cuda_compat-${name}`), version, note);
  // A Jetson compat package: libcuda.so.1.1, no driver version in its name.
  compat.jetson = join(dir(), 'cuda_compat-jetson');
  await buildStandIn({
    dir: join(compat.jetson, 'compat'),
    name: 'libcuda',
    soname: 'libcuda.so.1',
    version: '1.1',
    label: 'compat',
    note: null,
  });
});

const of = (name: string): string => compat[name] ?? '';

describe('link-driver chooses as NVIDIA does', () => {
  it('an older compat (the H200’s 580.95.05 on 580.159.04) is left out, saying why: the driver’s libraries stand alone', async () => {
    const { result, dest, loaded } = await linkWith('older', [of('older')]);
    expect(loaded).toBe(`libcuda ${KERNEL} driver`);
    expect(candidateLines(result)).toEqual([
      `  cuda_compat ${of('older')}: left out: NVIDIA's rule: compat 580.95.05 is not newer than the kernel driver 580.159.04`,
    ]);
    for (const name of ['libcuda.so.1', 'libnvidia-ptxjitcompiler.so.1', 'libnvidia-nvvm.so.4', 'libnvidia-ml.so.1'])
      expect(await readlink(join(dest, 'lib', name))).toMatch(new RegExp(`^${driver}/lib[\\w-]+\\.so\\.${KERNEL}$`));
    expect(result.stdout).toMatch(
      new RegExp(`^${dest}: links the driver's ${KERNEL} \\(\\d+ links\\), in \\.opengl-driver-gen-\\w{6}$`, 'm'),
    );
  });

  it('a newer compat on a listed branch goes in front: its libraries replace the driver’s of the same name, NVML stays the driver’s', async () => {
    const { result, dest, loaded } = await linkWith('newer-listed', [of('newer-listed')]);
    expect(loaded).toBe('libcuda 590.44.01 compat');
    expect(candidateLines(result)).toEqual([
      `  cuda_compat ${of('newer-listed')}: in front of the driver: NVIDIA's rule: the kernel driver 580.159.04 is of a branch its note lists (535, 550, 570, 575, 580, 590), and compat 590.44.01 is newer`,
    ]);
    const compatDir = join(of('newer-listed'), 'compat');
    expect(await readlink(join(dest, 'lib/libcuda.so.1'))).toBe(join(compatDir, 'libcuda.so.590.44.01'));
    expect(await readlink(join(dest, 'lib/libcuda.so'))).toBe(join(compatDir, 'libcuda.so.590.44.01'));
    expect(await readlink(join(dest, 'lib/libnvidia-ptxjitcompiler.so.1'))).toBe(join(compatDir, 'libnvidia-ptxjitcompiler.so.590.44.01'));
    expect(await readlink(join(dest, 'lib/libnvidia-nvvm.so.4'))).toBe(join(compatDir, 'libnvidia-nvvm.so.590.44.01'));
    expect(await readlink(join(dest, 'lib/libnvidia-ml.so.1'))).toBe(join(driver, `libnvidia-ml.so.${KERNEL}`));
    expect(await readlink(join(dest, `lib/libcuda.so.${KERNEL}`))).toBe(join(driver, `libcuda.so.${KERNEL}`));
  });

  it('a newer compat on a branch its note does not list is left out, naming the kernel driver and the listed branches', async () => {
    const { result, loaded } = await linkWith('newer-unlisted', [of('newer-unlisted')]);
    expect(loaded).toBe(`libcuda ${KERNEL} driver`);
    expect(candidateLines(result)).toEqual([
      `  cuda_compat ${of('newer-unlisted')}: left out: NVIDIA's rule: the kernel driver 580.159.04 is of branch 580, which its note does not list (535, 550, 570, 575, 590)`,
    ]);
  });

  it('without the note: compat only when the kernel driver’s major is lower', async () => {
    const major = await linkWith('no-note-newer-major', [of('no-note-newer-major')]);
    expect(major.loaded).toBe('libcuda 590.44.01 compat');
    expect(candidateLines(major.result)[0]).toContain(
      "it has no compatibility note, and the kernel driver's major (580.159.04) is lower than compat's (590.44.01)",
    );
    const same = await linkWith('no-note-same-major', [of('no-note-same-major')]);
    expect(same.loaded).toBe(`libcuda ${KERNEL} driver`);
    expect(candidateLines(same.result)[0]).toContain(
      "left out: NVIDIA's rule: it has no compatibility note, and the kernel driver's major (580.159.04) is not lower than compat's (580.200.01)",
    );
  });

  it('two candidates allowed: the newest goes in front, the other says which is newer; one left out says why', async () => {
    const { result, loaded } = await linkWith('two', [of('older'), of('also-listed'), of('newer-listed')]);
    expect(loaded).toBe('libcuda 590.44.01 compat');
    const lines = candidateLines(result);
    expect(lines[0]).toContain(`${of('older')}: left out: NVIDIA's rule: compat 580.95.05 is not newer`);
    expect(lines[1]).toContain(`${of('also-listed')}: left out: NVIDIA's rule allows it (`);
    expect(lines[1]).toMatch(new RegExp(`but ${of('newer-listed')} \\(590\\.44\\.01\\) is newer$`));
    expect(lines[2]).toContain(`${of('newer-listed')}: in front of the driver`);
  });

  it('a compat package whose libcuda has no driver version in its name (Jetson’s libcuda.so.1.1) is left out, saying so', async () => {
    const { result, loaded } = await linkWith('jetson', [of('jetson')]);
    expect(loaded).toBe(`libcuda ${KERNEL} driver`);
    expect(candidateLines(result)).toEqual([
      `  cuda_compat ${of('jetson')}: left out: ${join(of('jetson'), 'compat')} holds no libcuda.so.X.Y.Z: its driver version cannot be compared with the kernel driver's`,
    ]);
  });

  it('--driver-version decides for another machine: on a 575 kernel driver the older compat is newer, and goes in front', async () => {
    const dest = join(dir(), 'other-machine', 'opengl-driver');
    await mkdir(join(dir(), 'other-machine'));
    const result = await runCli(['link-driver', '--from', driver, '--driver-version', '575.57.08', '--cuda-compat', of('older'), dest]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('link-driver: kernel driver 575.57.08 (--driver-version)');
    expect(await readlink(join(dest, 'lib/libcuda.so.1'))).toBe(join(of('older'), 'compat/libcuda.so.580.95.05'));
  });
});
