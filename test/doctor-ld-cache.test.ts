// ld.so.cache in each of its layouts, checked against the real loader: an aarch64 system root whose
// /etc/ld.so.cache this test writes, read by glibc's ld.so under qemu-aarch64 -L ROOT and by
// doctor --root ROOT. New format, old format, old with new appended; entries of another ABI, named
// glibc-hwcaps entries this CPU cannot use, stale and wrong-machine entries, a runpath before the cache,
// and enough names that the binary search has to get the order of numbered names right.

import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FileReport } from '../src/doctor/doctor-report.js';
import { sysroot } from './helpers/fixtures.js';
import { ldCacheBytes, type CacheEntrySpec, type CacheLayout } from './helpers/doctor-ld-cache-writer.js';
import { traceLoader, type LoaderTrace } from './helpers/doctor-ld-debug.js';
import { doctorJson, reportedLoads } from './helpers/doctor-run.js';
import { mirrorInto } from './helpers/doctor-root.js';
import { buildLibrary, buildProgram } from './helpers/doctor-trees.js';
import { assertCliBuilt } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';

const AARCH64 = 0x0a03;
const X86_64 = 0x0303;
let root: string;

/** Names around the one looked up, numbered so that only a numeric comparison sorts them right. */
const neighbours: CacheEntrySpec[] = [
  'libcg.so.1',
  'libcg.so.2',
  'libcg.so.10',
  'libcf.so',
  'libch.so',
  'libcg2.so',
  'libc.so.5',
  'libz.so.9',
  'liba.so.100',
].flatMap((key) =>
  [8, 9, 10, 11].map((n) => ({ key: key.replace(/\d+$/, (d) => String(Number(d) + n)), value: `/opt/none/${key}.${n}`, flags: AARCH64 })),
);
const libc: CacheEntrySpec = { key: 'libc.so.6', value: '/lib/aarch64-linux-gnu/libc.so.6', flags: AARCH64 };

async function writeCache(entries: readonly CacheEntrySpec[], layout: CacheLayout): Promise<void> {
  await writeFile(join(root, 'etc', 'ld.so.cache'), ldCacheBytes([...entries, ...neighbours, libc], layout));
}

/** doctor --root and ld.so (trace mode, under qemu) on a program of the root, named as the root names it. */
async function both(program: string): Promise<{ report: FileReport; trace: LoaderTrace }> {
  const { json } = await doctorJson(['--root', root, join(root, program)]);
  expect(json.errors).toEqual([]);
  const report = json.files[0];
  if (report === undefined) throw new Error(`no report for ${program}`);
  const trace = await traceLoader({ arch: 'aarch64', mode: 'list', path: program, root });
  return { report, trace };
}

function expectAgreement({ report, trace }: { report: FileReport; trace: LoaderTrace }): void {
  expect(reportedLoads(report)).toEqual(trace.loads.map(({ name, path }) => ({ name, path })));
  const notFound = [...trace.stdout.matchAll(/^\s*(\S+) => not found$/gm)].map((m) => m[1]);
  expect(report.needed.filter((n) => n.status === 'missing').map((n) => n.name)).toEqual(notFound);
}

beforeAll(async () => {
  assertCliBuilt();
  root = await makeTempDir('doctor-cache-root');
  await mirrorInto(root, [sysroot('aarch64')], '/');
  await mkdir(join(root, 'etc'), { recursive: true });
  const arm = { arch: 'aarch64' as const };
  await buildLibrary(join(root, 'opt/c1/libcg.so'), 'libcg.so', arm);
  await buildLibrary(join(root, 'opt/r/libcg.so'), 'libcg.so', arm);
  await buildLibrary(join(root, 'opt/x86/libcg.so'), 'libcg.so');
  await buildProgram(join(root, 'opt/app/bin/prog'), { ...arm, needs: [join(root, 'opt/c1/libcg.so')] });
  await buildProgram(join(root, 'opt/app/bin/prog-runpath'), { ...arm, needs: [join(root, 'opt/c1/libcg.so')], runpath: '/opt/r' });
}, 120_000);

afterAll(async () => {
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

describe('the cache answers, in each layout', () => {
  for (const layout of ['new', 'old', 'old+new'] as const) {
    it(layout, async () => {
      await writeCache([{ key: 'libcg.so', value: '/opt/c1/libcg.so', flags: AARCH64 }], layout);
      const result = await both('/opt/app/bin/prog');
      expectAgreement(result);
      expect(result.report.loads[0]).toMatchObject({ name: 'libcg.so', path: '/opt/c1/libcg.so', rule: 'cache' });
      expect(result.report.loader.cache).toMatchObject({ path: '/etc/ld.so.cache', format: layout });
    });
  }
});

describe('what the loader takes from the cache', () => {
  it('a runpath entry that has the library comes first', async () => {
    await writeCache([{ key: 'libcg.so', value: '/opt/c1/libcg.so', flags: AARCH64 }], 'new');
    const result = await both('/opt/app/bin/prog-runpath');
    expectAgreement(result);
    expect(result.report.loads[0]).toMatchObject({ path: '/opt/r/libcg.so', rule: 'runpath' });
  });

  it('an entry of another ABI is not used', async () => {
    await writeCache([{ key: 'libcg.so', value: '/opt/x86/libcg.so', flags: X86_64 }], 'new');
    const result = await both('/opt/app/bin/prog');
    expectAgreement(result);
    expect(result.report.needed[0]?.status).toBe('missing');
  });

  it('a glibc-hwcaps entry this CPU has no subdirectory for is passed over for the plain one', async () => {
    await writeCache(
      [
        { key: 'libcg.so', value: '/opt/r/libcg.so', flags: AARCH64, glibcHwcaps: 'x86-64-v3' },
        { key: 'libcg.so', value: '/opt/c1/libcg.so', flags: AARCH64 },
      ],
      'new',
    );
    const result = await both('/opt/app/bin/prog');
    expectAgreement(result);
    expect(result.report.loads[0]?.path).toBe('/opt/c1/libcg.so');
  });

  it('an entry whose file is gone, or of another machine, sends the search on to the default directories', async () => {
    await mkdir(join(root, 'usr/lib/aarch64-linux-gnu'), { recursive: true });
    await copyFile(join(root, 'opt/c1/libcg.so'), join(root, 'usr/lib/aarch64-linux-gnu/libcg.so'));
    try {
      for (const value of ['/opt/gone/libcg.so', '/opt/x86/libcg.so']) {
        await writeCache([{ key: 'libcg.so', value, flags: AARCH64 }], 'new');
        const result = await both('/opt/app/bin/prog');
        expectAgreement(result);
        // /lib is a link to usr/lib in the root: the first default directory already has it.
        expect(result.report.loads[0]).toMatchObject({ rule: 'default', path: '/lib/aarch64-linux-gnu/libcg.so' });
        expect(result.report.needed[0]?.passedOver.map((p) => p.path)).toContain(value);
      }
    } finally {
      await rm(join(root, 'usr/lib/aarch64-linux-gnu/libcg.so'));
    }
  });
});
