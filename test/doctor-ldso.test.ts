// doctor against the real loader on every dynamic ELF fixture: the objects doctor says the loader
// opens, in order, are the ones glibc's ld.so opens (LD_DEBUG=libs,files), path for path — natively on
// x86_64, and for aarch64 under qemu-aarch64 -L ROOT with doctor --root ROOT.

import { rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FileReport } from '../src/doctor/doctor-report.js';
import { fixtures, loadManifest, sysroot, type Fixture } from './helpers/fixtures.js';
import { traceLoader } from './helpers/doctor-ld-debug.js';
import { doctorJson, reportedLoads } from './helpers/doctor-run.js';
import { mirrorInto } from './helpers/doctor-root.js';
import { assertCliBuilt } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';

const dynamic =
  (arch: Fixture['arch']) =>
  (f: Fixture): boolean =>
    f.arch === arch && f.kind !== 'static' && !f.tags.includes('dynamic-loader');

/** doctor once per LD_LIBRARY_PATH value the fixtures need; the reports by file. */
async function reportsFor(
  cases: readonly Fixture[],
  rootArgs: readonly string[],
  pathOf: (f: Fixture) => string,
): Promise<Map<string, FileReport>> {
  const groups = new Map<string, Fixture[]>();
  for (const f of cases) groups.set(f.libraryPath ?? '', [...(groups.get(f.libraryPath ?? '') ?? []), f]);
  const reports = new Map<string, FileReport>();
  for (const [libraryPath, group] of groups) {
    const llp = libraryPath === '' ? [] : ['--ld-library-path', libraryPath];
    const { json } = await doctorJson([...rootArgs, ...llp, ...group.map(pathOf)], { timeoutMs: 300_000 });
    expect(json.errors).toEqual([]);
    for (const file of json.files) reports.set(file.file, file);
  }
  return reports;
}

/** The loads doctor reported for a fixture are the ones ld.so makes running it (a program) or listing it (a library). */
async function expectSameLoads(
  report: FileReport | undefined,
  f: Fixture,
  loader: { readonly arch: 'x86_64' | 'aarch64'; readonly root?: string },
): Promise<void> {
  if (report === undefined) throw new Error(`doctor did not report ${f.path}`);
  const trace = await traceLoader({
    ...loader,
    mode: report.kind === 'program' ? 'run' : 'list',
    path: f.path,
    libraryPath: f.libraryPath,
  });
  expect(reportedLoads(report)).toEqual(trace.loads.map(({ name, path }) => ({ name, path })));
}

describe('doctor and ld.so open the same files: x86_64, natively', () => {
  const cases = fixtures(dynamic('x86_64'));
  let reports: Map<string, FileReport>;

  beforeAll(async () => {
    assertCliBuilt();
    reports = await reportsFor(cases, [], (f) => f.path);
  }, 600_000);

  it.each(cases.map((f) => [f.id, f] as const))('%s', async (_id, f) => {
    await expectSameLoads(reports.get(f.path), f, { arch: 'x86_64' });
  });
});

describe('doctor --root and ld.so under qemu open the same files: aarch64', () => {
  const cases = fixtures(dynamic('aarch64'));
  let root: string;
  let reports: Map<string, FileReport>;

  beforeAll(async () => {
    assertCliBuilt();
    root = await makeTempDir('doctor-aarch64-root');
    // The fixtures lie in the root at their own paths: qemu, which prefers the root's files, and
    // doctor, which sees only the root, then name every file alike.
    await mirrorInto(root, [sysroot('aarch64')], '/');
    const cache = loadManifest().cacheDir;
    const directories = new Set(
      cases
        .flatMap((f) => [dirname(dirname(f.path)), dirname(f.path), ...(f.libraryPath?.split(':') ?? [])])
        .filter((dir) => dir.startsWith(cache)),
    );
    await mirrorInto(root, [...directories], null);
    reports = await reportsFor(cases, ['--root', root], (f) => join(root, f.path));
  }, 600_000);

  afterAll(async () => {
    if (root !== undefined) await rm(root, { recursive: true, force: true });
  });

  it.each(cases.map((f) => [f.id, f] as const))('%s', async (_id, f) => {
    await expectSameLoads(reports.get(join(root, f.path)), f, { arch: 'aarch64', root });
  });
});
