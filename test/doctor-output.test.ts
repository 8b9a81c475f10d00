// What doctor prints: the text report line for line, and the --json document's field names as
// docs/doctor.md gives them (scripts rely on them). In an aarch64 system root, so that nothing of this
// machine (its cache, its driver, its CPU: another machine's is assumed, and the file line says so)
// shows in the output.

import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sysroot } from './helpers/fixtures.js';
import { doctorJson } from './helpers/doctor-run.js';
import { mirrorInto } from './helpers/doctor-root.js';
import { buildLibrary, buildProgram } from './helpers/doctor-trees.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';

let root: string;
let prog: string;

beforeAll(async () => {
  assertCliBuilt();
  root = join(await makeTempDir('doctor-output'), 'root');
  await mirrorInto(root, [sysroot('aarch64')], '/');
  await mkdir(join(root, 'etc'), { recursive: true });
  const lib = await buildLibrary(join(root, 'opt/app/lib/libgreet.so'), 'libgreet.so', { arch: 'aarch64' });
  prog = await buildProgram(join(root, 'opt/app/bin/prog'), { arch: 'aarch64', needs: [lib], runpath: '$ORIGIN/../lib' });
}, 120_000);

afterAll(async () => {
  if (root !== undefined) await rm(join(root, '..'), { recursive: true, force: true });
});

it('the text report: the libraries in load order, where each comes from, one summary line per tree', async () => {
  const result = await runCli(['doctor', '--root', root, join(root, 'opt/app/bin')]);
  expect(result.code).toBe(0);
  expect(result.stderr).toBe('');
  expect(result.stdout.split('\n')).toEqual([
    `doctor: the loader of the system under ${root}; LD_LIBRARY_PATH not set (--ld-library-path emulates one); kernel driver unknown (--driver-version tells it)`,
    '',
    `${prog}: program, aarch64, loader /lib/ld-linux-aarch64.so.1 (glibc 2.36, CPU assumed)`,
    '  libgreet.so => /opt/app/bin/../lib/libgreet.so  [RUNPATH of prog]',
    '  libc.so.6 => /lib/aarch64-linux-gnu/libc.so.6  [default directory]',
    '    ld-linux-aarch64.so.1 => /lib/ld-linux-aarch64.so.1  [the dynamic loader]',
    '',
    `${join(root, 'opt/app/bin')}: 1 dynamic ELF file, all well; 1 other file skipped`,
    '',
  ]);
});

it('the JSON document: its fields, as docs/doctor.md names them', async () => {
  const { json } = await doctorJson(['--root', root, '--ld-library-path', '/opt/extra', '--driver-version', '540.4.0', prog]);
  expect(Object.keys(json).sort()).toEqual(['errors', 'files', 'notDynamic', 'settings', 'summary', 'version']);
  expect(json.version).toBe(1);
  expect(json.settings).toEqual({ root, ldLibraryPath: '/opt/extra', driver: { version: '540.4.0', source: '--driver-version' } });
  const file = json.files[0];
  if (file === undefined) throw new Error('no file');
  expect(Object.keys(file).sort()).toEqual([
    'cuda',
    'dlopen',
    'file',
    'findings',
    'interpreter',
    'kind',
    'loader',
    'loads',
    'machine',
    'needed',
    'path',
    'wrapper',
  ]);
  expect(json.notDynamic).toEqual([]);
  expect(file).toMatchObject({
    file: prog,
    wrapper: null,
    path: '/opt/app/bin/prog',
    kind: 'program',
    machine: 'aarch64',
    interpreter: { path: '/lib/ld-linux-aarch64.so.1', found: true },
  });
  expect(file.loader).toEqual({
    path: '/lib/ld-linux-aarch64.so.1',
    glibc: '2.36',
    systemDirs: ['/lib/aarch64-linux-gnu/', '/usr/lib/aarch64-linux-gnu/', '/lib/', '/usr/lib/'],
    cache: { path: '/etc/ld.so.cache', format: null, entries: 0 },
    subdirectories: ['tls/aarch64/atomics', 'tls/aarch64', 'tls/atomics', 'tls', 'aarch64/atomics', 'aarch64', 'atomics'],
    platform: 'aarch64',
    lib: 'lib/aarch64-linux-gnu',
    cpu: 'assumed',
    assumed: [],
  });
  expect(file.loads[0]).toEqual({
    name: 'libgreet.so',
    path: '/opt/app/bin/../lib/libgreet.so',
    file: join(root, 'opt/app/lib/libgreet.so'),
    rule: 'runpath',
    owner: '/opt/app/bin/prog',
    directory: '/opt/app/bin/../lib/',
    neededBy: '/opt/app/bin/prog',
    depth: 1,
  });
  expect(file.needed[0]).toEqual({
    from: '/opt/app/bin/prog',
    name: 'libgreet.so',
    preload: false,
    status: 'loaded',
    path: '/opt/app/bin/../lib/libgreet.so',
    message: null,
    passedOver: [],
    searched: [],
  });
  expect(file.cuda).toEqual({ uses: false, libcuda: null });
  expect(json.summary).toEqual([{ path: prog, files: 1, skipped: 0, unreadable: 0, errors: 0, warnings: 0, problems: 0 }]);
});
