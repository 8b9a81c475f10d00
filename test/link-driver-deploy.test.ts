// What deploys link-driver, checked as far as a machine without NixOS and without a running systemd
// allows. The NixOS module (nix/link-driver.nix): parsed, evaluated against stand-ins for what it uses
// (nix/tests/link-driver-stand-ins.nix), what it declares and makes compared with what NixOS expects,
// and its service's script run at a stand-in boot (a mount namespace with an empty /run and the kernel
// driver's version in /sys/module/nvidia/version). The systemd units for a host without NixOS
// (systemd/): `systemd-analyze verify`, and the service's command line run the same way, with the
// options of /etc/default/cuda-patchelf-link-driver, finding the driver through the loader's cache.

import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { type CompatReleases, compatReleases, driverRelease, libcudaProbe, loaderCache, onMachine } from './helpers/driver-stand-ins.js';
import { cleanEnv, execTool, mustExec } from './helpers/exec.js';
import { REPO_ROOT, requireTool } from './helpers/fixtures.js';
import { assertCliBuilt, cliPath } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const KERNEL = '580.159.04';
const MODULE = join(REPO_ROOT, 'nix', 'link-driver.nix');
const STAND_INS = join(REPO_ROOT, 'nix', 'tests', 'link-driver-stand-ins.nix');
const UNITS = join(REPO_ROOT, 'systemd');
const SERVICE = 'cuda-patchelf-link-driver.service';
const PATH_UNIT = 'cuda-patchelf-link-driver.path';
/** Where the shipped service runs cuda-patchelf from: root's profile of a multi-user Nix. */
const PROFILE_COMMAND = '/nix/var/nix/profiles/default/bin/cuda-patchelf';

const dir = useTempDir('link-driver-deploy');
/** A package as Nix installs one: PKG/bin/cuda-patchelf, running the checkout's CLI. */
let pkg: string;
let driver: string;
let compat: CompatReleases;
let probe: string;

const nixEnv = (): NodeJS.ProcessEnv =>
  cleanEnv({ PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', NIX_CONFIG: 'build-users-group =' });

/**
 * Runs `script` with bash in a stand-in machine booting: an empty /run, the kernel driver KERNEL, the
 * cache `cache` when given; then prints where /run/opengl-driver/lib/libcuda.so.1 leads and what a
 * program whose runpath is /run/opengl-driver/lib loads.
 */
async function boot(script: string, cache?: string): Promise<string[]> {
  const machine = onMachine({ kernel: KERNEL, emptyRun: true, ...(cache === undefined ? {} : { cache }) });
  const [command, ...rest] = machine;
  const checks = `readlink /run/opengl-driver/lib/libcuda.so.1 && ${probe}`;
  const result = await execTool(command ?? '', [...rest, requireTool('bash'), '-e', '-c', `(${script}) >&2 && ${checks}`]);
  expect(result.code, result.stderr).toBe(0);
  return result.stdout.trim().split('\n');
}

beforeAll(async () => {
  assertCliBuilt();
  pkg = join(dir(), 'cuda-patchelf');
  await mkdir(join(pkg, 'bin'), { recursive: true });
  await writeFile(join(pkg, 'bin/cuda-patchelf'), `#!/bin/sh\nexec ${process.execPath} ${cliPath} "$@"\n`);
  await chmod(join(pkg, 'bin/cuda-patchelf'), 0o755);
  driver = join(dir(), 'nvidia-x11');
  await driverRelease(join(driver, 'lib'), KERNEL);
  compat = await compatReleases(dir());
  probe = await libcudaProbe(join(dir(), 'probe'), join(driver, `lib/libcuda.so.${KERNEL}`), '/run/opengl-driver/lib');
});

interface ModuleSummary {
  readonly options: Readonly<Record<string, { readonly type: string; readonly default: unknown }>>;
  readonly condition: boolean;
  readonly tmpfiles: Readonly<Record<string, unknown>>;
  readonly service: {
    readonly wantedBy: readonly string[];
    readonly before: readonly string[];
    readonly after: readonly string[];
    readonly restartIfChanged: boolean;
    readonly serviceConfig: Readonly<Record<string, unknown>>;
    readonly script: string;
  };
}

async function evaluateModule(graphicsEnv: string | null): Promise<ModuleSummary> {
  const args = [
    '--eval',
    '--strict',
    '--json',
    STAND_INS,
    '--argstr',
    'cudaPatchelf',
    pkg,
    '--argstr',
    'driver',
    driver,
    '--arg',
    'cudaCompat',
    `[ ${JSON.stringify(compat.older)} ${JSON.stringify(compat.newer)} ]`,
    ...(graphicsEnv === null ? [] : ['--argstr', 'graphicsEnv', graphicsEnv]),
  ];
  return JSON.parse((await mustExec(requireTool('nix-instantiate'), args, { env: nixEnv() })).stdout) as ModuleSummary;
}

describe('the NixOS module', () => {
  it('parses', async () => {
    const result = await execTool(requireTool('nix-instantiate'), ['--parse', MODULE], { env: nixEnv() });
    expect(result.code, result.stderr).toBe(0);
  });

  it('declares its options with NixOS’ defaults: the driver of hardware.nvidia, the link /run/opengl-driver, no compat', async () => {
    const { options, condition } = await evaluateModule(null);
    expect(condition).toBe(true);
    expect(options).toEqual({
      enable: { type: 'bool', default: false },
      package: { type: 'package', default: 'callPackage package.nix' },
      driver: { type: 'package', default: 'nvidia-x11' },
      cudaCompat: { type: 'listOf either package path', default: [] },
      driverLink: { type: 'str', default: '/run/opengl-driver' },
      extraArgs: { type: 'listOf str', default: [] },
    });
  });

  it('takes /run/opengl-driver over from the graphics module’s tmpfiles rule, and runs at boot once the module is loaded', async () => {
    const { tmpfiles, service } = await evaluateModule('/nix/store/00000000000000000000000000000000-graphics-drivers');
    expect(tmpfiles).toEqual({ '/run/opengl-driver': { _type: 'override', priority: 50, content: {} } });
    expect(service).toMatchObject({
      wantedBy: ['multi-user.target'],
      before: expect.arrayContaining(['multi-user.target', 'display-manager.service']),
      after: expect.arrayContaining(['systemd-modules-load.service']),
      restartIfChanged: true,
      serviceConfig: { Type: 'oneshot', RemainAfterExit: true },
    });
    expect(service.script).toBe(
      `exec ${pkg}/bin/cuda-patchelf link-driver --from ${driver}/lib --base /nix/store/00000000000000000000000000000000-graphics-drivers ` +
        `--cuda-compat ${compat.older} --cuda-compat ${compat.newer} /run/opengl-driver`,
    );
    // Without hardware.graphics there is no environment to keep.
    expect((await evaluateModule(null)).service.script).not.toContain('--base');
  });

  it('its script, at a boot on the kernel driver 580.159.04: the newer compat in front, the graphics environment kept', async () => {
    const env = join(dir(), 'graphics-drivers');
    await mkdir(join(env, 'share/glvnd'), { recursive: true });
    const { script } = (await evaluateModule(env)).service;
    // The script as the unit runs it (its exec left out, for the checks after it); bash -e: a check that fails fails the boot.
    const kept = `[ "$(readlink /run/opengl-driver/share)" = ${join(env, 'share')} ]`;
    const [linked, loaded] = await boot(`${script.replace(/^exec /, '')} && ${kept}`);
    expect(linked).toBe(join(compat.newer, 'compat/libcuda.so.590.44.01'));
    expect(loaded).toBe('libcuda 590.44.01 compat');
  });
});

describe('the systemd units for a host without NixOS', () => {
  /** The units as shipped, with the service's command pointing at `command`. */
  async function unitsRunning(command: string): Promise<string> {
    const units = join(dir(), 'units');
    await mkdir(units, { recursive: true });
    const service = await readFile(join(UNITS, SERVICE), 'utf8');
    expect(service.split('\n').filter((line) => line.includes(PROFILE_COMMAND))).toEqual([
      `ExecStart=${PROFILE_COMMAND} link-driver $LINK_DRIVER_ARGS /run/opengl-driver`,
    ]);
    await writeFile(join(units, SERVICE), service.replace(PROFILE_COMMAND, command));
    await writeFile(join(units, PATH_UNIT), await readFile(join(UNITS, PATH_UNIT), 'utf8'));
    return units;
  }

  it('pass systemd-analyze verify', async () => {
    const units = await unitsRunning(join(pkg, 'bin/cuda-patchelf'));
    const result = await execTool(requireTool('systemd-analyze'), ['verify', join(units, SERVICE), join(units, PATH_UNIT)]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toBe('');
    // A unit that names a command that is not there fails it: the check is not empty.
    const broken = await unitsRunning(join(dir(), 'no-such-command'));
    expect((await execTool(requireTool('systemd-analyze'), ['verify', join(broken, SERVICE)])).code).not.toBe(0);
  });

  it('the path unit starts the service when ldconfig rewrites the cache; a machine without a driver is not a failed boot', async () => {
    const path = await readFile(join(UNITS, PATH_UNIT), 'utf8');
    expect(path).toMatch(/^PathChanged=\/etc\/ld\.so\.cache$/m);
    expect(path).toMatch(new RegExp(`^Unit=${SERVICE.replace(/\./g, '\\.')}$`, 'm'));
    const service = await readFile(join(UNITS, SERVICE), 'utf8');
    expect(service).toMatch(/^SuccessExitStatus=1$/m);
    // Started again by the path unit: a oneshot that does not remain active.
    expect(service).not.toMatch(/^RemainAfterExit=/m);
  });

  it('the service’s command, with the options of /etc/default/cuda-patchelf-link-driver, makes /run/opengl-driver from the driver in the cache', async () => {
    const cache = await loaderCache(join(dir(), 'ld.so.cache'), [join(driver, 'lib')]);
    const defaults = join(dir(), 'cuda-patchelf-link-driver');
    await writeFile(defaults, `LINK_DRIVER_ARGS="--cuda-compat ${compat.older} --cuda-compat ${compat.newer}"\n`);
    const units = await unitsRunning(join(pkg, 'bin/cuda-patchelf'));
    const execStart = /^ExecStart=(.*)$/m.exec(await readFile(join(units, SERVICE), 'utf8'))?.[1] ?? '';
    // systemd splits an unquoted $VARIABLE at whitespace, as the shell does.
    const [linked, loaded] = await boot(`set -a; . ${defaults}; ${execStart}`, cache);
    expect(linked).toBe(join(compat.newer, 'compat/libcuda.so.590.44.01'));
    expect(loaded).toBe('libcuda 590.44.01 compat');
    // Without the options file: the driver alone.
    const [driverOnly, loadedDriver] = await boot(execStart.replace('$LINK_DRIVER_ARGS ', ''), cache);
    expect(driverOnly).toBe(join(driver, `lib/libcuda.so.${KERNEL}`));
    expect(loadedDriver).toBe(`libcuda ${KERNEL} driver`);
  });
});
