// doctor and NVIDIA's rule for cuda_compat. A compat libcuda is known by its `.note.cuda.fwd_compatibility`
// (however small, wherever it lies), and with the note doctor applies the rule of NVIDIA's container
// toolkit on the kernel driver: a branch the note does not list, and a compat libcuda older than the
// kernel driver (error 803), are findings that say so and name link-driver; a listed branch with a newer
// compat is well. Without the note, the rule of versions alone stands. The trees are patched by `apply`
// as a build patches them, with stand-in driver and compat libraries built as the real ones are laid
// out; the kernel driver comes from --driver-version, or from /sys/module/nvidia/version in a mount
// namespace. Last, a tree patched with the driver hook only, against a driver link made by link-driver:
// all well, and the program loads the libcuda doctor names.

import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { FileReport } from '../src/doctor/doctor-report.js';
import {
  buildStandIn,
  compatPackage,
  driverRelease,
  libcudaProbe,
  loaderCache,
  NOTE_580,
  noteListing,
  onMachine,
} from './helpers/driver-stand-ins.js';
import { doctorJson, type DoctorJson } from './helpers/doctor-run.js';
import { execTool } from './helpers/exec.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const KERNEL = '580.159.04';
const dir = useTempDir('doctor-compat-note');
/** The host driver, as --driver-link names it: HOST/lib holds its libraries. */
let host: string;
const compat: Record<string, string> = {};

/** A tree with bin/probe (it needs libcuda.so.1), patched by apply with these hook flags. */
async function patchedProbe(name: string, hooks: readonly string[]): Promise<string> {
  const tree = join(dir(), 'trees', name);
  await mkdir(join(tree, 'bin'), { recursive: true });
  await libcudaProbe(join(tree, 'bin/probe'), join(host, 'lib', `libcuda.so.${KERNEL}`), '$ORIGIN/../lib');
  const applied = await runCli(['apply', '--quiet', '--driver-link', host, ...hooks, tree]);
  expect(applied.code, applied.stderr).toBe(0);
  return tree;
}

function reportOf(json: DoctorJson): FileReport {
  const [report] = json.files;
  if (report === undefined) throw new Error('no report');
  return report;
}

const codes = (report: FileReport): string[] => report.findings.map((finding) => finding.code);
const finding = (report: FileReport, code: string) => report.findings.find((f) => f.code === code);

beforeAll(async () => {
  assertCliBuilt();
  host = join(dir(), 'host');
  await driverRelease(join(host, 'lib'), KERNEL);
  const packages: [string, string, object | string | null][] = [
    ['older', '580.95.05', NOTE_580],
    ['newer-listed', '590.44.01', noteListing([535, 550, 570, 575, 580, 590], '13.1')],
    ['newer-unlisted', '590.44.01', noteListing([535, 550, 570, 575, 590], '13.1')],
    ['no-note-older', '580.95.05', null],
    ['no-note-newer', '580.200.01', null],
    ['malformed', '590.44.01', '{"format":1,"driver":"580"}'],
  ];
  for (const [name, version, note] of packages) compat[name] = await compatPackage(join(dir(), `cuda_compat-${name}`), version, note);
});

describe('with the note, NVIDIA’s rule', () => {
  it('compat older than the kernel driver on a listed branch (the H200’s 580.95.05 on 580.159.04): cuda-803, naming the rule and link-driver', async () => {
    const tree = await patchedProbe('older', ['--cuda-compat', compat.older ?? '']);
    const { json, cli } = await doctorJson(['--driver-version', KERNEL, tree]);
    expect(cli.code).toBe(1);
    const report = reportOf(json);
    expect(report.cuda.libcuda).toMatchObject({
      kind: 'compat',
      version: '580.95.05',
      compatNote: { cudaVersion: '13.0', driver: NOTE_580.driver },
    });
    expect(codes(report)).toEqual(['cuda-803']);
    expect(finding(report, 'cuda-803')?.message).toContain(
      "older than the kernel driver 580.159.04 (--driver-version): CUDA fails with error 803, \"system has unsupported display driver / cuda driver combination\" (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH); NVIDIA's rule (its container toolkit's, with the note's driver branches 535, 550, 565, 570, 575, 580) uses compat only when it is newer than the kernel driver",
    );
    expect(finding(report, 'cuda-803')?.fix).toContain('cuda-patchelf link-driver /run/opengl-driver --cuda-compat DIR');
    const text = await runCli(['doctor', '--driver-version', KERNEL, tree]);
    expect(text.stdout).toContain(
      `compat, version 580.95.05 (link target); note: CUDA 13.0; driver branches 535 550 565 570 575 580; devices 1 2 7 8 9 10 11 12 13 14`,
    );
  });

  it('a newer compat on a listed branch: well', async () => {
    const tree = await patchedProbe('newer-listed', ['--cuda-compat', compat['newer-listed'] ?? '']);
    const { json, cli } = await doctorJson(['--driver-version', KERNEL, tree]);
    expect(cli.code, cli.stdout).toBe(0);
    expect(reportOf(json).cuda.libcuda).toMatchObject({ kind: 'compat', version: '590.44.01' });
    expect(codes(reportOf(json))).toEqual([]);
  });

  it('a newer compat on a branch the note does not list: a finding naming the kernel driver, its branch and the listed ones', async () => {
    const tree = await patchedProbe('newer-unlisted', ['--cuda-compat', compat['newer-unlisted'] ?? '']);
    const { json, cli } = await doctorJson(['--driver-version', KERNEL, tree]);
    expect(cli.code).toBe(1);
    const report = reportOf(json);
    expect(codes(report)).toEqual(['compat-branch-unlisted']);
    const unlisted = finding(report, 'compat-branch-unlisted');
    expect(unlisted?.severity).toBe('error');
    expect(unlisted?.message).toContain(
      'the kernel driver 580.159.04 is of branch 580, which its note does not list (535, 550, 570, 575, 590) (--driver-version)',
    );
    expect(unlisted?.message).toContain("NVIDIA's rule");
    expect(unlisted?.fix).toContain('cuda-patchelf link-driver');
    // The same compat on a kernel driver of a listed branch, older: well.
    expect((await doctorJson(['--driver-version', '575.57.08', tree])).cli.code).toBe(0);
  });

  it('the kernel driver from /sys/module/nvidia/version, and --driver-version over it', async () => {
    const tree = await patchedProbe('older-sys', ['--cuda-compat', compat.older ?? '']);
    const machine = onMachine({ kernel: KERNEL });
    const fromSys = await runCli(['doctor', '--json', tree], { wrapper: machine });
    const json = JSON.parse(fromSys.stdout) as DoctorJson;
    expect(json.settings.driver).toEqual({ version: KERNEL, source: '/sys/module/nvidia/version' });
    expect(finding(reportOf(json), 'cuda-803')?.message).toContain('older than the kernel driver 580.159.04 (/sys/module/nvidia/version)');
    const overridden = await runCli(['doctor', '--json', '--driver-version', '575.57.08', tree], { wrapper: machine });
    expect((JSON.parse(overridden.stdout) as DoctorJson).settings.driver).toEqual({ version: '575.57.08', source: '--driver-version' });
    expect(overridden.code).toBe(0);
  });

  it('with no NVIDIA module loaded, the kernel driver from the name of the driver libcuda the loader’s cache lists', async () => {
    const tree = await patchedProbe('older-cache', ['--cuda-compat', compat.older ?? '']);
    const cache = await loaderCache(join(dir(), 'ld.so.cache'), [join(host, 'lib')]);
    const result = await runCli(['doctor', '--json', tree], { wrapper: onMachine({ cache }) });
    const json = JSON.parse(result.stdout) as DoctorJson;
    const source = `the name of ${join(host, 'lib', `libcuda.so.${KERNEL}`)} (/etc/ld.so.cache)`;
    expect(json.settings.driver).toEqual({ version: KERNEL, source });
    expect(finding(reportOf(json), 'cuda-803')?.message).toContain(`older than the kernel driver 580.159.04 (${source})`);
    // Without the module and without a driver in the cache, the version is unknown: a warning.
    const none = await runCli(['doctor', '--json', tree], {
      wrapper: onMachine({ cache: await loaderCache(join(dir(), 'empty.cache'), []) }),
    });
    expect((JSON.parse(none.stdout) as DoctorJson).settings.driver).toBeNull();
    expect(codes(reportOf(JSON.parse(none.stdout) as DoctorJson))).toEqual(['driver-version-unknown']);
  });
});

describe('without the note, or with one that cannot be read', () => {
  it('no note: the rule of versions alone, as before (older: cuda-803 without NVIDIA’s rule; newer on the same branch: well)', async () => {
    const older = await patchedProbe('no-note-older', ['--cuda-compat', compat['no-note-older'] ?? '']);
    const report = reportOf((await doctorJson(['--driver-version', KERNEL, older])).json);
    expect(report.cuda.libcuda).toMatchObject({ kind: 'compat', compatNote: null });
    expect(codes(report)).toEqual(['cuda-803']);
    expect(finding(report, 'cuda-803')?.message).not.toContain("NVIDIA's rule");
    const newer = await patchedProbe('no-note-newer', ['--cuda-compat', compat['no-note-newer'] ?? '']);
    const { json, cli } = await doctorJson(['--driver-version', KERNEL, newer]);
    expect(cli.code).toBe(0);
    expect(codes(reportOf(json))).toEqual([]);
  });

  it('a note that cannot be read: a warning saying why, and the rule of versions', async () => {
    const tree = await patchedProbe('malformed', ['--cuda-compat', compat.malformed ?? '']);
    const { json, cli } = await doctorJson(['--driver-version', KERNEL, tree]);
    expect(cli.code).toBe(0);
    const report = reportOf(json);
    expect(codes(report)).toEqual(['compat-note-unreadable']);
    expect(finding(report, 'compat-note-unreadable')).toMatchObject({ severity: 'warning' });
    expect(finding(report, 'compat-note-unreadable')?.message).toContain('"driver" is not a list of whole numbers');
    expect(report.cuda.libcuda?.compatNote).toEqual({ error: '"driver" is not a list of whole numbers' });
    // On a newer kernel driver, older: 803 by the versions (and the host's NVML, 580.159.04, is another release).
    expect(codes(reportOf((await doctorJson(['--driver-version', '595.10.01', tree])).json))).toEqual([
      'compat-note-unreadable',
      'cuda-803',
      'nvml-mismatch',
    ]);
  });

  it('a small libcuda with the note is compat, where one without it counts as a stub', async () => {
    const base = { name: 'libcuda', soname: 'libcuda.so.1', label: 'compat', small: true } as const;
    const noted = await buildStandIn({
      ...base,
      dir: join(dir(), 'small/noted'),
      version: '590.44.01',
      note: JSON.stringify(noteListing([580])),
    });
    const bare = await buildStandIn({ ...base, dir: join(dir(), 'small/bare'), version: '590.44.01', note: null });
    for (const [libcuda, kind, expected] of [
      [noted, 'compat', []],
      [bare, 'stub', ['libcuda-stub']],
    ] as const) {
      const probe = await libcudaProbe(join(dir(), `small/probe-${kind}`), libcuda, join(libcuda, '..'));
      const report = reportOf((await doctorJson(['--driver-version', KERNEL, probe])).json);
      expect(report.cuda.libcuda?.kind).toBe(kind);
      expect(codes(report)).toEqual(expected);
    }
  });

  it("the driver's own libcuda carries the note too (580.159.04's does): of the kernel driver's release, it is the driver's", async () => {
    const own = await buildStandIn({
      name: 'libcuda',
      soname: 'libcuda.so.1',
      label: 'driver',
      dir: join(dir(), 'noted-driver/usr/local/nvidia/lib64'),
      version: KERNEL,
      note: JSON.stringify(noteListing([580])),
    });
    const probe = await libcudaProbe(join(dir(), 'noted-driver/probe'), own, join(own, '..'));
    const report = reportOf((await doctorJson(['--driver-version', KERNEL, probe])).json);
    expect(report.cuda.libcuda).toMatchObject({ kind: 'driver', version: KERNEL });
    expect(codes(report)).toEqual([]);
  });
});

describe('a tree built with the driver hook only, and the driver link made by link-driver', () => {
  it('the older compat left out: the driver’s libcuda, all well; a newer one on a listed branch put in front: all well, and the program loads it', async () => {
    const link = join(dir(), 'link');
    const tree = await patchedProbe('driver-hook-only', []);
    const retarget = await runCli(['apply', '--quiet', '--driver-link', link, tree]);
    expect(retarget.code, retarget.stderr).toBe(0);
    const linkDriver = (...candidates: string[]) =>
      runCli([
        'link-driver',
        '--from',
        join(host, 'lib'),
        '--driver-version',
        KERNEL,
        ...candidates.flatMap((c) => ['--cuda-compat', c]),
        link,
      ]);
    const made = await linkDriver(compat.older ?? '');
    expect(made.code, made.stderr).toBe(0);
    let doctor = await doctorJson(['--driver-version', KERNEL, tree]);
    expect(doctor.cli.code, doctor.cli.stdout).toBe(0);
    expect(reportOf(doctor.json).cuda.libcuda).toMatchObject({ path: join(link, 'lib/libcuda.so.1'), kind: 'driver', version: KERNEL });
    const probe = join(tree, 'bin/probe');
    expect((await execTool(probe, [])).stdout).toBe(`libcuda ${KERNEL} driver\n`);

    const relinked = await linkDriver(compat.older ?? '', compat['newer-listed'] ?? '');
    expect(relinked.code, relinked.stderr).toBe(0);
    doctor = await doctorJson(['--driver-version', KERNEL, tree]);
    expect(doctor.cli.code, doctor.cli.stdout).toBe(0);
    expect(reportOf(doctor.json).cuda.libcuda).toMatchObject({ kind: 'compat', version: '590.44.01' });
    expect((await execTool(probe, [])).stdout).toBe('libcuda 590.44.01 compat\n');
  });
});
