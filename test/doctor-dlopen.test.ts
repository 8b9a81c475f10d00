// dlopen as the loader does it, checked against the real loader: the CUDA runtime opens libcuda.so.1
// through its own DT_RUNPATH, not the program's (x86_64 natively; aarch64 under qemu with --root), and
// a library that declares what it opens in a `.note.dlopen` note is resolved from its own runpath too.

import { copyFile, mkdir, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { FileReport } from '../src/doctor/doctor-report.js';
import type { BuildArch } from './helpers/arch.js';
import { cudaFixture, requireTool, sysroot } from './helpers/fixtures.js';
import { compileProbe, place } from './helpers/doctor-cuda-tree.js';
import { traceLoader, type LoaderTrace, type RealLoad } from './helpers/doctor-ld-debug.js';
import { doctorJson, reportedLoads } from './helpers/doctor-run.js';
import { mirrorInto } from './helpers/doctor-root.js';
import { buildLibrary } from './helpers/doctor-trees.js';
import { mustExec } from './helpers/exec.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const scratch = useTempDir('doctor-dlopen');

/**
 * A program that asks the CUDA runtime for the device count, so that libcudart dlopens libcuda.so.1:
 * libcudart's runpath leads to driver/, the program's to decoy/ (each holds a libcuda.so.1).
 */
async function buildCudaProbe(base: string, arch: BuildArch): Promise<string> {
  const cudart = join(base, 'lib/libcudart.so.11.0');
  await place(cudaFixture(arch, 'libcudart11.0').path, cudart);
  const libcuda = cudaFixture(arch, 'libcuda1').path;
  await place(libcuda, join(base, 'driver/libcuda.so.535.261.03'));
  // A copy, not a link: the same inode under two names is one library to the loader.
  await mkdir(join(base, 'decoy'), { recursive: true });
  await copyFile(libcuda, join(base, 'decoy/libcuda.so.535.261.03'));
  for (const dir of ['driver', 'decoy']) await symlink('libcuda.so.535.261.03', join(base, dir, 'libcuda.so.1'));
  const set = await runCli(['set-runpath', join(base, 'driver'), cudart]);
  expect(set.code, set.stderr).toBe(0);
  return compileProbe(
    base,
    arch,
    cudart,
    'int e = cudaGetDeviceCount(&n); printf("cudaGetDeviceCount: %d (%d)\\n", e, n);',
    '$ORIGIN/../lib:$ORIGIN/../decoy',
  );
}

/** The loads of the first dlopen of `name` in a trace: the library and what it pulled in. */
function dlopenLoads(trace: LoaderTrace, name: string): RealLoad[] {
  const first = trace.loads.find((l) => l.dlopen?.name === name)?.dlopen;
  return trace.loads.filter((l) => l.dlopen === first && first !== undefined && first !== null);
}

function libcudartCall(report: FileReport): FileReport['dlopen'][number] {
  const call = report.dlopen.find((d) => d.name === 'libcuda.so.1' && d.reason === 'cuda-runtime');
  if (call === undefined) throw new Error(`no dlopen of libcuda.so.1 by libcudart in ${JSON.stringify(report.dlopen)}`);
  return call;
}

beforeAll(assertCliBuilt);

describe('libcudart dlopens libcuda.so.1 through its own runpath', () => {
  it('x86_64, natively', async () => {
    const probe = await buildCudaProbe(join(scratch(), 'x86_64'), 'x86_64');
    const { json, cli } = await doctorJson([probe]);
    expect(json.errors).toEqual([]);
    const report = json.files[0] as FileReport;
    const trace = await traceLoader({ arch: 'x86_64', mode: 'run', path: probe });
    expect(trace.stdout).toMatch(/^cudaGetDeviceCount: /m);
    expect(reportedLoads(report)).toEqual(trace.loads.filter((l) => l.dlopen === null).map(({ name, path }) => ({ name, path })));
    const real = dlopenLoads(trace, 'libcuda.so.1');
    expect(real[0]).toMatchObject({
      name: 'libcuda.so.1',
      path: join(scratch(), 'x86_64/driver/libcuda.so.1'),
      dlopenedBy: `${join(scratch(), 'x86_64/bin')}/../lib/libcudart.so.11.0`,
    });
    const call = libcudartCall(report);
    expect(call.loads).toEqual(real.map(({ name, path }) => ({ name, path })));
    expect(call).toMatchObject({ caller: `${join(scratch(), 'x86_64/bin')}/../lib/libcudart.so.11.0`, rule: 'runpath' });
    // The program's own runpath would have found the decoy: doctor says which one CUDA uses, and that they differ.
    expect(report.cuda.libcuda).toMatchObject({
      path: join(scratch(), 'x86_64/driver/libcuda.so.1'),
      kind: 'driver',
      version: '535.261.03',
      versionSource: 'link target',
    });
    expect(report.dlopen.find((d) => d.name === 'libcuda.so.1' && d.reason === 'needs-cudart')?.path).toBe(
      `${join(scratch(), 'x86_64/bin')}/../decoy/libcuda.so.1`,
    );
    expect(report.findings.map((f) => f.code)).toContain('libcuda-differs');
    expect(cli.code).toBe(0);
  });

  it('aarch64, under qemu with --root', async () => {
    const root = join(scratch(), 'root');
    await mirrorInto(root, [sysroot('aarch64')], '/');
    await buildCudaProbe(join(root, 'opt/app'), 'aarch64');
    // libcudart in the root names its driver directory as the root names it.
    const set = await runCli(['set-runpath', '/opt/app/driver', join(root, 'opt/app/lib/libcudart.so.11.0')]);
    expect(set.code, set.stderr).toBe(0);
    const { json } = await doctorJson(['--root', root, join(root, 'opt/app/bin/probe')]);
    expect(json.errors).toEqual([]);
    const report = json.files[0] as FileReport;
    const trace = await traceLoader({ arch: 'aarch64', mode: 'list', path: '/opt/app/bin/probe', root });
    expect(reportedLoads(report)).toEqual(trace.loads.map(({ name, path }) => ({ name, path })));
    const real = await traceLoader({ arch: 'aarch64', mode: 'run', path: join(root, 'opt/app/bin/probe'), root });
    const opened = dlopenLoads(real, 'libcuda.so.1');
    expect(opened[0]?.path).toBe('/opt/app/driver/libcuda.so.1');
    expect(libcudartCall(report).loads).toEqual(opened.map(({ name, path }) => ({ name, path })));
  });
});

/**
 * A program whose library libopener.so says in a `.note.dlopen` that it opens `soname` (libnvidia-ml.so.1
 * unless given; and does, printing "opened: 1" or the loader's error), with nvml/ in its runpath and a
 * decoy directory in the program's; `nvml` builds what nvml/ holds.
 */
async function buildNoteOpener(base: string, nvml: (dir: string) => Promise<void>, soname = 'libnvidia-ml.so.1'): Promise<string> {
  await nvml(join(base, 'nvml'));
  await buildLibrary(join(base, 'decoy', soname), soname);
  const payload = JSON.stringify([{ feature: 'nvml', description: 'NVML', priority: 'required', soname: [soname] }]);
  // The descriptor's size in bytes: the payload's UTF-8, its NUL, padded to 4.
  const size = Buffer.byteLength(payload) + 1;
  const padded = size + ((4 - (size % 4)) % 4);
  const source = join(base, 'opener.c');
  await writeFile(
    source,
    `#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
__attribute__((used, section(".note.dlopen"), aligned(4))) static const struct { uint32_t n_namesz, n_descsz, n_type; char name[4]; char desc[${padded}]; } note = { 4, ${padded}, 0x407c0c0a, "FDO", ${JSON.stringify(payload)} };
int open_nvml(void) { void *h = dlopen(${JSON.stringify(soname)}, RTLD_NOW); if (h == 0) fprintf(stderr, "dlopen: %s\\n", dlerror()); return h != 0; }
`,
  );
  const opener = join(base, 'lib/libopener.so');
  await mkdir(dirname(opener), { recursive: true });
  await mustExec(requireTool('gcc'), [
    '-shared',
    '-fPIC',
    '-O1',
    '-o',
    opener,
    source,
    '-Wl,-soname,libopener.so',
    `-Wl,--enable-new-dtags,-rpath,${join(base, 'nvml')}`,
    '-ldl',
  ]);
  const main = join(base, 'main.c');
  await writeFile(main, '#include <stdio.h>\nint open_nvml(void);\nint main(void) { printf("opened: %d\\n", open_nvml()); return 0; }\n');
  const prog = join(base, 'bin/prog');
  await mkdir(dirname(prog), { recursive: true });
  await mustExec(requireTool('gcc'), [
    '-O1',
    '-o',
    prog,
    main,
    opener,
    `-Wl,--enable-new-dtags,-rpath,${join(base, 'lib')}:${join(base, 'decoy')}`,
  ]);
  return prog;
}

/** The opener of buildNoteOpener with a libnvidia-ml.so.1 that needs what `dependency` builds (given nvml/): doctor's report and the program's run. */
async function openerNeeding(
  base: string,
  dependency: (dir: string) => Promise<string>,
): Promise<{ report: FileReport; trace: LoaderTrace }> {
  const prog = await buildNoteOpener(base, async (dir) => {
    await buildLibrary(join(dir, 'libnvidia-ml.so.1'), 'libnvidia-ml.so.1', { needs: [await dependency(dir)], runpath: dir });
  });
  const { json } = await doctorJson([prog]);
  return { report: json.files[0] as FileReport, trace: await traceLoader({ arch: 'x86_64', mode: 'run', path: prog }) };
}

describe('.note.dlopen', () => {
  it('names what a library opens; the library’s runpath finds it, as the loader does', async () => {
    const base = join(scratch(), 'note');
    const prog = await buildNoteOpener(base, async (dir) => void (await buildLibrary(join(dir, 'libnvidia-ml.so.1'))));
    const { json } = await doctorJson([prog]);
    const report = json.files[0] as FileReport;
    const trace = await traceLoader({ arch: 'x86_64', mode: 'run', path: prog });
    expect(trace.stdout).toContain('opened: 1');
    const real = dlopenLoads(trace, 'libnvidia-ml.so.1');
    const call = report.dlopen.find((d) => d.name === 'libnvidia-ml.so.1');
    expect(call).toMatchObject({ caller: join(base, 'lib/libopener.so'), reason: 'note', path: join(base, 'nvml/libnvidia-ml.so.1') });
    expect(call?.loads).toEqual(real.map(({ name, path }) => ({ name, path })));
  });

  it('a dependency marked DF_1_NOOPEN (-z nodlopen) fails the dlopen, as the loader does', async () => {
    const base = join(scratch(), 'note-noopen');
    const { report, trace } = await openerNeeding(base, (dir) =>
      buildLibrary(join(dir, 'libnoopen.so'), 'libnoopen.so', { extra: ['-Wl,-z,nodlopen'] }),
    );
    expect(trace.stdout).toContain('opened: 0');
    expect(trace.stderr).toContain('dlopen: libnoopen.so: shared object cannot be dlopen()ed');
    const call = report.dlopen.find((d) => d.name === 'libnvidia-ml.so.1');
    expect(call).toMatchObject({
      caller: join(base, 'lib/libopener.so'),
      path: join(base, 'nvml/libnvidia-ml.so.1'),
      missing: [],
      refused: { name: 'libnoopen.so', path: join(base, 'nvml/libnoopen.so'), message: 'shared object cannot be dlopen()ed' },
    });
    expect(report.findings.find((f) => f.code === 'dlopen-missing')).toMatchObject({
      severity: 'error',
      message: `${join(base, 'lib/libopener.so')} opens libnvidia-ml.so.1 with dlopen, and it needs libnoopen.so, which cannot be loaded (${join(base, 'nvml/libnoopen.so')}: shared object cannot be dlopen()ed) (its .note.dlopen says required)`,
    });
  });

  it("the DT_RPATH of a dlopen'ed library serves what its dependencies need, as for any object that loads others", async () => {
    const base = join(scratch(), 'note-rpath-chain');
    const prog = await buildNoteOpener(base, async (dir) => {
      const deeper = await buildLibrary(join(base, 'e/libdeeper.so'));
      const dependency = await buildLibrary(join(base, 'd/libdep.so'), 'libdep.so', { needs: [deeper] });
      await buildLibrary(join(dir, 'libnvidia-ml.so.1'), 'libnvidia-ml.so.1', {
        needs: [dependency],
        rpath: `${join(base, 'd')}:${join(base, 'e')}`,
      });
    });
    const { json } = await doctorJson([prog]);
    const report = json.files[0] as FileReport;
    const trace = await traceLoader({ arch: 'x86_64', mode: 'run', path: prog });
    expect(trace.stdout).toContain('opened: 1');
    const call = report.dlopen.find((d) => d.name === 'libnvidia-ml.so.1');
    expect(call).toMatchObject({ missing: [], refused: null });
    expect(call?.loads).toEqual(dlopenLoads(trace, 'libnvidia-ml.so.1').map(({ name, path }) => ({ name, path })));
    expect(report.findings).toEqual([]);
  });

  it('a soname that is not ASCII is the bytes of its UTF-8, as the loader opens it', async () => {
    const base = join(scratch(), 'note-utf8');
    const soname = 'libnvidé.so.1';
    const prog = await buildNoteOpener(base, async (dir) => void (await buildLibrary(join(dir, soname), soname)), soname);
    const { json } = await doctorJson([prog]);
    const report = json.files[0] as FileReport;
    const trace = await traceLoader({ arch: 'x86_64', mode: 'run', path: prog });
    expect(trace.stdout).toContain('opened: 1');
    expect(report.dlopen.find((d) => d.reason === 'note')).toMatchObject({
      name: soname,
      caller: join(base, 'lib/libopener.so'),
      status: 'loaded',
      path: join(base, 'nvml', soname),
    });
    expect(report.findings).toEqual([]);
  });

  it('a dependency that is not found fails the dlopen too', async () => {
    const base = join(scratch(), 'note-gone');
    const { report, trace } = await openerNeeding(base, () => buildLibrary(join(base, 'elsewhere/libgone.so')));
    expect(trace.stdout).toContain('opened: 0');
    expect(trace.stderr).toContain('dlopen: libgone.so: cannot open shared object file');
    expect(report.dlopen.find((d) => d.name === 'libnvidia-ml.so.1')).toMatchObject({ missing: ['libgone.so'], refused: null });
    expect(report.findings.find((f) => f.code === 'dlopen-missing')?.message).toContain('and it needs libgone.so, which is not found');
  });
});
