// What link-driver refuses, and how it says what it would do. Without the right to write DEST's
// directory (run as nobody), a DEST that is a directory, or DEST's directory missing: one line, exit 3,
// and the directory exactly as it was. No driver, in --from or in the loader's cache: one line, exit 1,
// nothing made. A wrong command line: exit 2 before anything is read. --dry-run lists every link and
// writes nothing; --json says the same for scripts; --base keeps a graphics drivers environment under
// the driver's libraries, as NixOS' /run/opengl-driver holds one.

import { chmod, mkdir, readlink, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { compatPackage, driverRelease, loaderCache, NOTE_580, noteListing, onMachine } from './helpers/driver-stand-ins.js';
import { requireTool } from './helpers/fixtures.js';
import { assertCliBuilt, runCli, stderrLines } from './helpers/run-cli.js';
import { snapshotTree } from './helpers/tree-tools.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const KERNEL = '580.159.04';
const dir = useTempDir('link-driver-refusals');
let driver: string;
let older: string;
let newer: string;

/** link-driver with the stand-in driver, for the kernel driver KERNEL. */
const linkDriver = (args: readonly string[], wrapper?: readonly string[]) =>
  runCli(['link-driver', '--from', driver, '--driver-version', KERNEL, ...args], wrapper === undefined ? {} : { wrapper });

beforeAll(async () => {
  assertCliBuilt();
  // Readable by nobody, for the run without the right to write.
  await chmod(dir(), 0o755);
  driver = await driverRelease(join(dir(), 'driver'), KERNEL);
  older = await compatPackage(join(dir(), 'cuda_compat-580'), '580.95.05', NOTE_580);
  newer = await compatPackage(join(dir(), 'cuda_compat-590'), '590.44.01', noteListing([580, 590], '13.1'));
});

describe('DEST that cannot be made: one line, exit 3, nothing half-written', () => {
  it('without the right to write its directory (as nobody): DEST neither made nor, when there, changed', async () => {
    requireTool('setpriv');
    const nobody = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'];
    const parent = join(dir(), 'root-owned');
    await mkdir(parent, { mode: 0o755 });
    const dest = join(parent, 'opengl-driver');
    const none = await linkDriver([dest], nobody);
    expect(none.code).toBe(3);
    expect(stderrLines(none)).toEqual([
      `cuda-patchelf: ${dest}: cannot make the driver link in ${parent}: permission denied; left as it was`,
    ]);
    expect((await snapshotTree(parent)).size).toBe(0);

    expect((await linkDriver(['--cuda-compat', older, dest])).code).toBe(0);
    const before = await snapshotTree(parent);
    const changed = await linkDriver(['--cuda-compat', newer, dest], nobody);
    expect(changed.code).toBe(3);
    expect(stderrLines(changed)).toEqual([
      `cuda-patchelf: ${dest}: cannot make the driver link in ${parent}: permission denied; left as it was`,
    ]);
    expect(await snapshotTree(parent)).toEqual(before);
    // Nothing to change needs no right to write.
    const same = await linkDriver(['--cuda-compat', older, dest], nobody);
    expect(same.code, same.stderr).toBe(0);
    expect(same.stdout).toContain('nothing written');
  });

  it('a DEST that is a directory is left alone', async () => {
    const parent = join(dir(), 'a-directory');
    await mkdir(join(parent, 'opengl-driver/lib'), { recursive: true });
    const before = await snapshotTree(parent);
    const result = await linkDriver([join(parent, 'opengl-driver')]);
    expect(result.code).toBe(3);
    expect(stderrLines(result)).toEqual([
      `cuda-patchelf: ${join(parent, 'opengl-driver')}: is a directory, not a symbolic link: link-driver switches the driver link by replacing a link, and leaves this alone (move it away first)`,
    ]);
    expect(await snapshotTree(parent)).toEqual(before);
  });

  it("DEST's directory missing: link-driver makes the link, not the directories above it", async () => {
    const dest = join(dir(), 'missing', 'opengl-driver');
    const result = await linkDriver([dest]);
    expect(result.code).toBe(3);
    expect(stderrLines(result)).toEqual([
      `cuda-patchelf: ${dest}: cannot make the driver link in ${join(dir(), 'missing')}: no such file; left as it was`,
    ]);
  });
});

describe('no driver: exit 1, nothing made', () => {
  it('--from a directory without a libcuda.so.X.Y.Z', async () => {
    const empty = join(dir(), 'no-driver');
    await mkdir(join(empty, 'lib'), { recursive: true });
    const result = await runCli(['link-driver', '--from', join(empty, 'lib'), join(empty, 'opengl-driver')]);
    expect(result.code).toBe(1);
    expect(stderrLines(result)).toEqual([
      `cuda-patchelf: link-driver: no NVIDIA driver: no libcuda.so.X.Y.Z (the NVIDIA driver's libcuda) in ${join(empty, 'lib')}; ${join(empty, 'opengl-driver')} is left as it was`,
    ]);
    expect((await snapshotTree(empty)).has('opengl-driver')).toBe(false);
  });

  it('a loader cache that lists no libcuda.so.1 (ldconfig over the system’s directories only)', async () => {
    const place = join(dir(), 'no-driver-cache');
    await mkdir(place);
    const cache = await loaderCache(join(place, 'ld.so.cache'), []);
    const result = await runCli(['link-driver', '--json', join(place, 'opengl-driver')], { wrapper: onMachine({ cache }) });
    expect(result.code).toBe(1);
    expect(stderrLines(result)).toEqual([
      `cuda-patchelf: link-driver: no NVIDIA driver: /etc/ld.so.cache lists no libcuda.so.1 for x86_64: the NVIDIA driver is not installed (or ldconfig has not run since); ${join(place, 'opengl-driver')} is left as it was`,
    ]);
    expect(JSON.parse(result.stdout)).toMatchObject({
      version: 1,
      outcome: 'no-driver',
      problem: expect.stringContaining('lists no libcuda.so.1'),
    });
  });

  it('a loader cache whose libcuda.so.1 is a cuda_compat one (its directory in the loader’s configuration) names no driver', async () => {
    const place = join(dir(), 'compat-in-cache');
    await mkdir(place);
    const cache = await loaderCache(join(place, 'ld.so.cache'), [join(newer, 'compat')]);
    const result = await runCli(['link-driver', join(place, 'opengl-driver')], { wrapper: onMachine({ cache }) });
    expect(result.code).toBe(1);
    expect(stderrLines(result)).toEqual([
      `cuda-patchelf: link-driver: no NVIDIA driver: /etc/ld.so.cache names ${join(newer, 'compat/libcuda.so.590.44.01')} for libcuda.so.1, a cuda_compat libcuda (it lies in a compat directory), not the driver's; name the driver's directory with --from; ${join(place, 'opengl-driver')} is left as it was`,
    ]);
  });
});

describe('usage errors: exit 2, before anything is read', () => {
  it.each([
    [
      ['--cuda-compat', '/nonexistent-compat'],
      '--cuda-compat /nonexistent-compat: /nonexistent-compat/compat is not a directory (a cuda_compat package holds its libraries there)',
    ],
    [['--driver-version', 'latest'], '--driver-version takes a version such as 580.159.04, not "latest"'],
    [['--from', '/nonexistent-driver'], '--from /nonexistent-driver: /nonexistent-driver is not a directory'],
    [['--base', '/nonexistent-base'], '--base /nonexistent-base: /nonexistent-base is not a directory'],
  ])('%j', async (args, message) => {
    const parent = join(dir(), 'usage');
    await mkdir(parent, { recursive: true });
    const result = await runCli(['link-driver', ...args, join(parent, 'opengl-driver')]);
    expect(result.code).toBe(2);
    expect(stderrLines(result)).toEqual([`cuda-patchelf: ${message}`]);
    expect((await snapshotTree(parent)).size).toBe(0);
  });
});

describe('what it would link, and what it linked', () => {
  it('--dry-run lists every link and where it comes from, and writes nothing', async () => {
    const parent = join(dir(), 'dry-run');
    await mkdir(parent);
    const dest = join(parent, 'opengl-driver');
    const result = await linkDriver(['--dry-run', '--cuda-compat', newer, dest]);
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout.split('\n');
    expect(lines).toContain(`  lib/libcuda.so.1 -> ${join(newer, 'compat/libcuda.so.590.44.01')}  [compat]`);
    expect(lines).toContain(`  lib/libnvidia-ml.so.1 -> ${join(driver, `libnvidia-ml.so.${KERNEL}`)}  [driver]`);
    // libcuda first: compat's links come before the driver's.
    expect(lines.findIndex((line) => line.includes('[compat]'))).toBeLessThan(lines.findIndex((line) => line.includes('[driver]')));
    expect(lines).toContain(
      `${dest}: would link the driver's ${KERNEL}, with cuda_compat ${newer} (590.44.01) in front (19 links); --dry-run: nothing written`,
    );
    expect((await snapshotTree(parent)).size).toBe(0);
  });

  it('--json: the kernel driver, the driver release, each candidate and why, every link', async () => {
    const parent = join(dir(), 'json');
    await mkdir(parent);
    const dest = join(parent, 'opengl-driver');
    const result = await linkDriver(['--json', '--cuda-compat', older, '--cuda-compat', newer, dest]);
    expect(result.code, result.stderr).toBe(0);
    const json = JSON.parse(result.stdout);
    expect(json).toMatchObject({
      version: 1,
      dest,
      dryRun: false,
      outcome: 'switched',
      generation: await readlink(dest),
      kernel: { version: KERNEL, source: '--driver-version' },
      driver: { version: KERNEL, source: driver, files: expect.arrayContaining([join(driver, `libcuda.so.${KERNEL}`)]) },
      compat: [
        {
          dir: older,
          version: '580.95.05',
          libcuda: join(older, 'compat/libcuda.so.580.95.05'),
          use: false,
          chosen: false,
          note: { cudaVersion: '13.0' },
        },
        { dir: newer, version: '590.44.01', use: true, chosen: true, note: { driver: [580, 590] } },
      ],
      warnings: [],
    });
    expect(json.driver.files[0]).toBe(join(driver, `libcuda.so.${KERNEL}`));
    expect(json.links).toContainEqual({ path: 'lib/libcuda.so.1', target: join(newer, 'compat/libcuda.so.590.44.01'), from: 'compat' });
    const again = JSON.parse((await linkDriver(['--json', '--cuda-compat', older, '--cuda-compat', newer, dest])).stdout);
    expect(again).toMatchObject({ outcome: 'unchanged', generation: json.generation });
  });

  it('--base keeps a graphics drivers environment (its entries, and those of its lib/) under the driver’s libraries', async () => {
    const env = join(dir(), 'graphics-drivers');
    await mkdir(join(env, 'lib/dri'), { recursive: true });
    await mkdir(join(env, 'share/vulkan/icd.d'), { recursive: true });
    await writeFile(join(env, 'lib/libEGL_mesa.so.0'), '');
    await symlink(join(dir(), 'elsewhere/libcuda.so.1'), join(env, 'lib/libcuda.so.1'));
    const parent = join(dir(), 'base');
    await mkdir(parent);
    const dest = join(parent, 'opengl-driver');
    const result = await linkDriver(['--base', env, dest]);
    expect(result.code, result.stderr).toBe(0);
    expect(await readlink(join(dest, 'share'))).toBe(join(env, 'share'));
    expect(await readlink(join(dest, 'lib/dri'))).toBe(join(env, 'lib/dri'));
    expect(await readlink(join(dest, 'lib/libEGL_mesa.so.0'))).toBe(join(env, 'lib/libEGL_mesa.so.0'));
    expect(await readlink(join(dest, 'lib/libcuda.so.1'))).toBe(join(driver, `libcuda.so.${KERNEL}`));
  });
});
