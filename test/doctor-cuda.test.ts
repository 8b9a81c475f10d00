// Will CUDA start? doctor's verdicts on CUDA-shaped outputs, without a GPU: a cuda_compat libcuda older
// than the kernel driver (error 803) after `apply --cuda-compat`, and the same output with the driver
// hook only; a user-space driver of another version; a link-time stub; no libcuda at all; a Jetson
// compat driver whose L4T libraries are missing; NVRTC without its builtins; CUDA libraries from two
// installations; a driver whose parts are of different releases; where the version of a libcuda comes
// from.

import { cp, mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FileReport } from '../src/doctor/doctor-report.js';
import { cudaFixture, sysroot } from './helpers/fixtures.js';
import { cudaOutput, libcudaAt, place } from './helpers/doctor-cuda-tree.js';
import { ldCacheBytes } from './helpers/doctor-ld-cache-writer.js';
import { doctorJson } from './helpers/doctor-run.js';
import { mirrorInto } from './helpers/doctor-root.js';
import { buildLibrary, buildProgram } from './helpers/doctor-trees.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';

const KERNEL = '550.54.14';
const OLDER = '535.261.03';
let t: string;
let driver: string;
let compat: string;
let pristine: string;

/** The report of the file at `path`, or of bin/probe in the tree at `path`. */
function reportOf(files: readonly FileReport[], path: string): FileReport {
  const found = files.find((f) => f.file === path) ?? files.find((f) => f.file === join(path, 'bin/probe'));
  if (found === undefined) throw new Error(`no report for ${path} among ${files.map((f) => f.file).join(', ')}`);
  return found;
}

const codes = (report: FileReport): string[] => report.findings.map((f) => f.code);

/** A fresh copy of the pristine output, patched by `apply` with these hook options. */
async function patched(name: string, hooks: readonly string[]): Promise<string> {
  const out = join(t, name);
  await cp(pristine, out, { recursive: true, verbatimSymlinks: true });
  const applied = await runCli(['apply', '--quiet', ...hooks, out]);
  expect(applied.code, applied.stderr).toBe(0);
  return out;
}

beforeAll(async () => {
  assertCliBuilt();
  t = await makeTempDir('doctor-cuda');
  // The driver of the machine (its libcuda as new as the kernel module), and a cuda_compat package
  // whose compat libcuda is older.
  driver = join(t, 'opengl-driver');
  await libcudaAt(join(driver, 'lib'), KERNEL);
  compat = join(t, 'cuda_compat');
  await libcudaAt(join(compat, 'compat'), OLDER);
  pristine = (await cudaOutput(join(t, 'pristine'))).root;
}, 120_000);

afterAll(async () => {
  if (t !== undefined) await rm(t, { recursive: true, force: true });
});

describe('cuda_compat older than the kernel driver', () => {
  it('apply --cuda-compat: doctor exits 1 naming CUDA error 803 and the fix', async () => {
    const out = await patched('compat', ['--driver-link', driver, '--cuda-compat', compat]);
    const text = await runCli(['doctor', '--driver-version', KERNEL, out]);
    expect(text.code).toBe(1);
    expect(text.stdout).toContain('error (cuda-803)');
    expect(text.stdout).toContain('CUDA fails with error 803, "system has unsupported display driver / cuda driver combination"');
    // The fix names both ways out: rebuild without the hook, or take the entry out of the built tree.
    const fix = text.stdout.split('\n').find((line) => line.startsWith('    fix: leave the compat directory out'));
    expect(fix).toContain('cuda-patchelf apply --drop-cuda-compat DIR ...');
    expect(fix).toContain('dontUseAutoAddCudaCompatRunpath = true');
    expect(text.stdout).toMatch(
      /^.*compat: \d+ dynamic ELF files?, \d+ with problems \(\d+ errors?, \d+ warnings?\); \d+ other files? skipped$/m,
    );
    const { json, cli } = await doctorJson(['--driver-version', KERNEL, out]);
    expect(cli.code).toBe(1);
    const report = reportOf(json.files, out);
    expect(report.cuda.libcuda).toMatchObject({
      path: join(compat, 'compat/libcuda.so.1'),
      kind: 'compat',
      version: OLDER,
      versionSource: 'link target',
      caller: `${join(out, 'bin')}/../lib/libcudart.so.11.0`,
    });
    expect(codes(report)).toContain('cuda-803');
  });

  it('--problems: the runtime, its dlopen of libcuda and the driver it finds, before the finding; nothing else', async () => {
    const out = await patched('compat-problems', ['--driver-link', driver, '--cuda-compat', compat]);
    const text = await runCli(['doctor', '--problems', '--driver-version', KERNEL, out]);
    expect(text.code).toBe(1);
    const lines = text.stdout.split('\n');
    const start = lines.indexOf(
      `${join(out, 'bin/probe')}: program, x86_64, loader /lib64/ld-linux-x86-64.so.2 (glibc ${reportOf((await doctorJson([out])).json.files, out).loader.glibc ?? ''})`,
    );
    expect(start).toBeGreaterThan(0);
    const libcuda = join(compat, 'compat/libcuda.so.1');
    expect(lines.slice(start + 1, lines.indexOf('', start))).toEqual([
      `  libcudart.so.11.0 => ${join(out, 'bin')}/../lib/libcudart.so.11.0  [RUNPATH of probe]`,
      `  libcuda.so.1 => ${libcuda}  [RUNPATH of libcudart.so.11.0] (dlopen by libcudart.so.11.0, probe)`,
      `  CUDA driver: ${libcuda} -> ${join(compat, `compat/libcuda.so.${OLDER}`)}: compat, version ${OLDER} (link target)`,
      expect.stringMatching(/^ {2}error \(cuda-803\): /),
      expect.stringMatching(/^ {4}fix: leave the compat directory out/),
    ]);
    // The C library and the driver's optional libraries (NVML, the debugger) have nothing to do with it.
    expect(text.stdout).not.toContain('libc.so.6');
    expect(text.stdout).not.toContain('libnvidia-ml.so.1');
    expect(text.stdout).toMatch(/compat-problems: 2 dynamic ELF files, 2 with problems/);
  });

  it('the driver hook only: exit 0', async () => {
    const out = await patched('driver-only', ['--driver-link', driver]);
    const { json, cli } = await doctorJson(['--driver-version', KERNEL, out]);
    expect(json.summary[0]).toMatchObject({ errors: 0, problems: 0 });
    expect(cli.code).toBe(0);
    expect(reportOf(json.files, out).cuda.libcuda).toMatchObject({
      kind: 'driver',
      version: KERNEL,
      path: join(driver, 'lib/libcuda.so.1'),
    });
  });

  it('a compat libcuda as new as the driver is fine; --driver-lib reads the driver version from a libcuda', async () => {
    const out = await patched('compat-same', ['--driver-link', driver, '--cuda-compat', compat]);
    expect((await doctorJson(['--driver-version', OLDER, out])).cli.code).toBe(0);
    const { json, cli } = await doctorJson(['--driver-lib', join(driver, 'lib/libcuda.so.1'), out]);
    expect(json.settings.driver).toMatchObject({ version: KERNEL });
    expect(cli.code).toBe(1);
    expect(codes(reportOf(json.files, out))).toContain('cuda-803');
  });

  it('without the kernel driver version, a compat libcuda is a warning, not a verdict', async () => {
    const out = await patched('compat-unknown', ['--driver-link', driver, '--cuda-compat', compat]);
    const { json, cli } = await doctorJson([out]);
    // This machine's driver, when it has one, is the one checked against.
    if (json.settings.driver !== null) {
      expect(json.settings.driver.source).toMatch(/^\/(sys|proc)\//);
      return;
    }
    expect(codes(reportOf(json.files, out))).toEqual(['driver-version-unknown']);
    expect(cli.code).toBe(0);
  });
});

describe('other drivers that do not start CUDA', () => {
  it('a user-space driver of another version than the kernel module', async () => {
    const out = await patched('mismatch', ['--driver-link', driver]);
    const { json, cli } = await doctorJson(['--driver-version', '560.35.03', out]);
    expect(cli.code).toBe(1);
    expect(codes(reportOf(json.files, out))).toContain('driver-mismatch');
  });

  it('a link-time stub in the runpath, and apply --remove-stubs putting the driver in its place', async () => {
    const stubs = join(t, 'fake-cuda_cudart/lib/stubs');
    await buildLibrary(join(stubs, 'libcuda.so.1'), 'libcuda.so.1');
    const out = join(t, 'stubbed');
    await cp(pristine, out, { recursive: true, verbatimSymlinks: true });
    const set = await runCli(['set-runpath', stubs, join(out, 'lib/libcudart.so.11.0')]);
    expect(set.code, set.stderr).toBe(0);
    const before = await doctorJson(['--driver-version', KERNEL, out]);
    expect(before.cli.code).toBe(1);
    expect(reportOf(before.json.files, out).cuda.libcuda).toMatchObject({ kind: 'stub', path: join(stubs, 'libcuda.so.1') });
    expect(codes(reportOf(before.json.files, out))).toContain('libcuda-stub');
    const fixed = await runCli(['apply', '--quiet', '--no-driver', '--remove-stubs', '--driver-link', driver, out]);
    expect(fixed.code, fixed.stderr).toBe(0);
    const after = await doctorJson(['--driver-version', KERNEL, out]);
    expect(after.cli.code).toBe(0);
    expect(reportOf(after.json.files, out).cuda.libcuda).toMatchObject({ kind: 'driver', version: KERNEL });
  });

  it('the version a libcuda carries in .rodata when neither its name nor a link tells it', async () => {
    const plain = join(t, 'plain-driver');
    await place(cudaFixture('x86_64', 'libcuda1').path, join(plain, 'libcuda.so.1'));
    const out = join(t, 'plain');
    await cp(pristine, out, { recursive: true, verbatimSymlinks: true });
    expect((await runCli(['set-runpath', plain, join(out, 'lib/libcudart.so.11.0')])).code).toBe(0);
    const { json } = await doctorJson(['--driver-version', OLDER, out]);
    expect(reportOf(json.files, out).cuda.libcuda).toMatchObject({ version: OLDER, versionSource: 'library contents' });
  });
});

describe('aarch64 (Jetson) system roots', () => {
  let root: string;

  beforeAll(async () => {
    root = join(t, 'jetson');
    await mirrorInto(root, [sysroot('aarch64')], '/');
    await mkdir(join(root, 'etc'), { recursive: true });
    await cudaOutput(join(root, 'opt/app'), 'aarch64');
  }, 120_000);

  it('no libcuda anywhere: CUDA cannot start', async () => {
    const { json, cli } = await doctorJson(['--root', root, join(root, 'opt/app')]);
    expect(cli.code).toBe(1);
    expect(codes(reportOf(json.files, join(root, 'opt/app')))).toContain('libcuda-missing');
  });

  it('after apply, the runpath names /run/opengl-driver/lib and that directory is missing, then holds no libcuda: said so, with what provides it', async () => {
    const app = join(root, 'opt/nixos-app');
    await cudaOutput(app, 'aarch64');
    const applied = await runCli(['apply', '--quiet', app]);
    expect(applied.code, applied.stderr).toBe(0);
    // Each file that loads CUDA names the directory: the program (it needs the runtime) and the runtime, as the loader opened it.
    const namedBy = '(in the RUNPATH of /opt/nixos-app/bin/probe and the RUNPATH of /opt/nixos-app/bin/../lib/libcudart.so.11.0)';
    const missing = await doctorJson(['--root', root, join(app, 'bin/probe')]);
    expect(missing.cli.code).toBe(1);
    const gone = reportOf(missing.json.files, join(app, 'bin/probe')).findings.find((f) => f.code === 'libcuda-missing');
    expect(gone?.message).toContain(`: /run/opengl-driver/lib ${namedBy} does not exist here`);
    // Not the advice for a file apply has not seen: the runpath already holds the directory.
    expect(gone?.fix).not.toContain('apply');
    expect(gone?.fix).toContain('hardware.graphics.enable');
    expect(gone?.fix).toContain('NVIDIA Container Toolkit');
    // The directory is there (NixOS with only Mesa), without the NVIDIA driver.
    await mkdir(join(root, 'run/opengl-driver/lib'), { recursive: true });
    try {
      const empty = await doctorJson(['--root', root, join(app, 'bin/probe')]);
      const without = reportOf(empty.json.files, join(app, 'bin/probe')).findings.find((f) => f.code === 'libcuda-missing');
      expect(without?.message).toContain(`: /run/opengl-driver/lib ${namedBy} holds no libcuda.so.1 here`);
      expect(without?.fix).toContain('services.xserver.videoDrivers');
      await libcudaAt(join(root, 'run/opengl-driver/lib'), '540.4.0', 'aarch64');
      const found = await doctorJson(['--root', root, '--driver-version', '540.4.0', join(app, 'bin/probe')]);
      expect(reportOf(found.json.files, join(app, 'bin/probe')).cuda.libcuda).toMatchObject({
        kind: 'driver',
        path: '/run/opengl-driver/lib/libcuda.so.1',
      });
      expect(found.cli.code).toBe(0);
    } finally {
      await rm(join(root, 'run'), { recursive: true, force: true });
    }
  });

  it('a compat driver whose L4T libraries (libnvrm_gpu.so, libnvrm_mem.so) are missing, then present', async () => {
    // The compat driver of a Jetson needs the L4T driver libraries: a copy of the fixture's libcuda
    // is made to (a copy, as add-needed edits it in place).
    const libcuda = join(root, 'opt/cuda_compat/compat/libcuda.so.540.4.0');
    await mkdir(join(root, 'opt/cuda_compat/compat'), { recursive: true });
    await cp(cudaFixture('aarch64', 'libcuda1').path, libcuda);
    await symlink('libcuda.so.540.4.0', join(root, 'opt/cuda_compat/compat/libcuda.so.1'));
    const added = await runCli(['add-needed', 'libnvrm_gpu.so', libcuda]);
    expect(added.code, added.stderr).toBe(0);
    expect((await runCli(['add-needed', 'libnvrm_mem.so', libcuda])).code).toBe(0);
    expect((await runCli(['set-runpath', '/opt/cuda_compat/compat', join(root, 'opt/app/lib/libcudart.so.11.0')])).code).toBe(0);
    const missing = await doctorJson(['--root', root, '--driver-version', '540.4.0', join(root, 'opt/app/bin/probe')]);
    expect(missing.cli.code).toBe(1);
    const finding = reportOf(missing.json.files, join(root, 'opt/app/bin/probe')).findings.find(
      (f) => f.code === 'compat-dependency-missing',
    );
    expect(finding?.message).toMatch(/needs libnvrm_mem\.so, libnvrm_gpu\.so, which are not found/);
    // The L4T libraries where a Jetson keeps them, found through ld.so.cache.
    const l4t = join(root, 'usr/lib/aarch64-linux-gnu/nvidia');
    for (const name of ['libnvrm_gpu.so', 'libnvrm_mem.so']) await buildLibrary(join(l4t, name), name, { arch: 'aarch64' });
    await writeFile(
      join(root, 'etc/ld.so.cache'),
      ldCacheBytes(
        ['libnvrm_gpu.so', 'libnvrm_mem.so'].map((key) => ({ key, value: `/usr/lib/aarch64-linux-gnu/nvidia/${key}`, flags: 0x0a03 })),
        'new',
      ),
    );
    const found = await doctorJson(['--root', root, '--driver-version', '540.4.0', join(root, 'opt/app/bin/probe')]);
    expect(codes(reportOf(found.json.files, join(root, 'opt/app/bin/probe')))).toEqual([]);
    expect(found.cli.code).toBe(0);
  });
});

describe('the other CUDA libraries', () => {
  it('NVRTC without its builtins library', async () => {
    const lib = join(t, 'nvrtc/lib');
    await buildLibrary(join(lib, 'libnvrtc.so.11.8.89'), 'libnvrtc.so.11.2', { runpath: '$ORIGIN' });
    await symlink('libnvrtc.so.11.8.89', join(lib, 'libnvrtc.so.11.2'));
    const prog = await buildProgram(join(t, 'nvrtc/bin/prog'), { needs: [join(lib, 'libnvrtc.so.11.2')], runpath: '$ORIGIN/../lib' });
    const without = await doctorJson([prog]);
    expect(without.cli.code).toBe(1);
    expect(reportOf(without.json.files, prog).findings.find((f) => f.code === 'dlopen-missing')?.message).toContain(
      'libnvrtc-builtins.so.11.8',
    );
    await buildLibrary(join(lib, 'libnvrtc-builtins.so.11.8'));
    const withBuiltins = await doctorJson([prog]);
    expect(withBuiltins.cli.code).toBe(0);
  });

  it('CUDA libraries from two installations: a warning, not an error; one package per directory (pip, Nixpkgs) is fine', async () => {
    const installation = join(t, 'other-cuda/lib64');
    const cublas = await buildLibrary(join(installation, 'libcublas.so.11'));
    await buildLibrary(join(installation, 'libcudart.so.12'));
    const wheel = join(t, 'site-packages/nvidia/cufft/lib');
    const cufft = await buildLibrary(join(wheel, 'libcufft.so.11'));
    const out = join(t, 'mixed');
    await cp(pristine, out, { recursive: true, verbatimSymlinks: true });
    expect((await runCli(['set-runpath', join(driver, 'lib'), join(out, 'lib/libcudart.so.11.0')])).code).toBe(0);
    const mixed = await buildProgram(join(out, 'bin/mixed'), {
      needs: [join(out, 'lib/libcudart.so.11.0'), cublas],
      runpath: `$ORIGIN/../lib:${installation}`,
    });
    const wheels = await buildProgram(join(out, 'bin/wheels'), {
      needs: [join(out, 'lib/libcudart.so.11.0'), cufft],
      runpath: `$ORIGIN/../lib:${wheel}`,
    });
    const { json, cli } = await doctorJson(['--driver-version', KERNEL, mixed, wheels]);
    expect(reportOf(json.files, mixed).findings.map((f) => [f.severity, f.code])).toEqual([['warning', 'cuda-libraries-mixed']]);
    expect(reportOf(json.files, mixed).findings[0]?.message).toContain(`libcublas.so.11 comes from ${installation}`);
    expect(reportOf(json.files, wheels).findings).toEqual([]);
    expect(cli.code).toBe(0);
  });
});

describe('the driver’s other parts', () => {
  it('a PTX JIT compiler of another release than libcuda, an NVML of another release than the kernel driver', async () => {
    const parts = join(t, 'parts/lib');
    await mkdir(parts, { recursive: true });
    // A copy with a runpath of its own, as driver packages have: libcuda opens its JIT compiler from there.
    await cp(cudaFixture('x86_64', 'libcuda1').path, join(parts, `libcuda.so.${KERNEL}`));
    await symlink(`libcuda.so.${KERNEL}`, join(parts, 'libcuda.so.1'));
    expect((await runCli(['set-runpath', '$ORIGIN', join(parts, `libcuda.so.${KERNEL}`)])).code).toBe(0);
    for (const name of ['libnvidia-ptxjitcompiler', 'libnvidia-ml']) {
      await buildLibrary(join(parts, `${name}.so.${OLDER}`), `${name}.so.1`);
      await symlink(`${name}.so.${OLDER}`, join(parts, `${name}.so.1`));
    }
    const out = join(t, 'parts-out');
    await cp(pristine, out, { recursive: true, verbatimSymlinks: true });
    expect((await runCli(['set-runpath', parts, join(out, 'lib/libcudart.so.11.0')])).code).toBe(0);
    const { json, cli } = await doctorJson(['--driver-version', KERNEL, join(out, 'bin/probe')]);
    expect(codes(reportOf(json.files, join(out, 'bin/probe')))).toEqual(['driver-libraries-mixed', 'nvml-mismatch']);
    expect(cli.code).toBe(0);
  });
});
