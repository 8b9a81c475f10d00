// The loader's preload file (/etc/ld.so.preload): its libraries load before the program's own, each
// once, and one that is not found is reported and passed over. Checked against glibc's loader run by
// qemu-x86_64 -L ROOT in an x86_64 system root (qemu-aarch64 cannot be the oracle here: it does not
// send the loader's faccessat of the preload file into the root).

import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { FileReport } from '../src/doctor/doctor-report.js';
import { ldCacheBytes } from './helpers/doctor-ld-cache-writer.js';
import { traceLoader } from './helpers/doctor-ld-debug.js';
import { doctorJson, reportedLoads } from './helpers/doctor-run.js';
import { buildLibrary, buildProgram } from './helpers/doctor-trees.js';
import { assertCliBuilt } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';

let root: string;

beforeAll(async () => {
  assertCliBuilt();
  root = await makeTempDir('doctor-preload');
  // The smallest x86_64 system root: this machine's loader and C library, and a cache of its own (of one
  // name nothing needs), so that qemu does not fall back to this machine's /etc/ld.so.cache.
  await mkdir(join(root, 'lib64'), { recursive: true });
  await mkdir(join(root, 'lib/x86_64-linux-gnu'), { recursive: true });
  await mkdir(join(root, 'etc'), { recursive: true });
  await copyFile('/lib64/ld-linux-x86-64.so.2', join(root, 'lib64/ld-linux-x86-64.so.2'));
  await copyFile('/lib/x86_64-linux-gnu/libc.so.6', join(root, 'lib/x86_64-linux-gnu/libc.so.6'));
  await writeFile(
    join(root, 'etc/ld.so.cache'),
    ldCacheBytes([{ key: 'libunused.so.1', value: '/opt/none/libunused.so.1', flags: 0x0303 }], 'new'),
  );
  await buildLibrary(join(root, 'opt/pre/libpre.so'));
  const lib = await buildLibrary(join(root, 'opt/r/libown.so'));
  await buildProgram(join(root, 'opt/app/prog'), { needs: [lib], runpath: '/opt/r' });
  // A program where a preload is named: the loader finds it, cannot map it, and goes on without it.
  await buildProgram(join(root, 'opt/pre/prog-as-preload'));
  await writeFile(join(root, 'etc/ld.so.preload'), '/opt/pre/libpre.so libnotthere.so /opt/pre/prog-as-preload\n');
}, 60_000);

afterAll(async () => {
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

it('preloaded libraries load first; one that is not found, or cannot be mapped, is a warning', async () => {
  const { json } = await doctorJson(['--root', root, join(root, 'opt/app/prog')]);
  expect(json.errors).toEqual([]);
  const report = json.files[0] as FileReport;
  const trace = await traceLoader({ arch: 'x86_64', mode: 'list', path: '/opt/app/prog', root });
  // glibc makes the refused program's link map before it refuses it; it is gone after.
  const loaded = trace.loads.filter((load) => load.path !== '/opt/pre/prog-as-preload');
  expect(loaded).toHaveLength(trace.loads.length - 1);
  expect(reportedLoads(report)).toEqual(loaded.map(({ name, path }) => ({ name, path })));
  expect(report.loads[0]).toMatchObject({ name: '/opt/pre/libpre.so', rule: 'path' });
  expect(trace.stderr).toContain("object 'libnotthere.so' from /etc/ld.so.preload cannot be preloaded");
  expect(trace.stderr).toContain(
    "object '/opt/pre/prog-as-preload' from /etc/ld.so.preload cannot be preloaded (cannot dynamically load position-independent executable): ignored",
  );
  expect(report.needed.filter((n) => n.preload).map((n) => [n.name, n.status])).toEqual([
    ['/opt/pre/libpre.so', 'loaded'],
    ['libnotthere.so', 'missing'],
    ['/opt/pre/prog-as-preload', 'fatal'],
  ]);
  expect(report.findings.map((f) => [f.code, f.severity])).toEqual([
    ['preload-missing', 'warning'],
    ['preload-refused', 'warning'],
  ]);
});
