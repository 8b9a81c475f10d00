// The hook order is what the dynamic loader does, not only a string: a program that needs libcuda.so.1 and
// has no runpath of its own loads the cuda_compat copy when both hooks ran (compat before driver), the
// driver's copy when only the driver hook ran, and the driver's again when the compat directory has none.
// Shown on x86_64 natively and on aarch64 under qemu, with real NVIDIA libcuda.so.1 files (Debian's
// libcuda1 535) as the compat library: they cannot reach a GPU here, but they must be the ones LOADED.

import { copyFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { BuildArch } from './helpers/arch.js';
import { compileLibrary, compileProgram, writeSources } from './helpers/compile.js';
import { describeEachBuildArch } from './helpers/each-build-arch.js';
import { fixture, ldList, runOn } from './helpers/fixtures.js';
import { runCli } from './helpers/run-cli.js';
import { copyTree } from './helpers/tree-tools.js';
import { readDynamic, tagKind } from './helpers/readelf.js';

// Prints the path of the libcuda.so.1 the loader mapped, and which stand-in it is when it is one; it
// references no libcuda symbol, so the real NVIDIA library can stand in the same place.
const WHICH_C = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
static int each(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size; (void)data;
  const char *slash = strrchr(info->dlpi_name, '/');
  if (slash != NULL && strcmp(slash + 1, "libcuda.so.1") == 0) printf("libcuda: %s\\n", info->dlpi_name);
  return 0;
}
int main(void) {
  dl_iterate_phdr(each, NULL);
  const char *(*which)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "standin_which");
  if (which != NULL) printf("standin: %s\\n", which());
  return 0;
}
`;

const STANDIN_C = `const char *standin_which(void) { return WHICH; }
`;

const REAL_LIBCUDA: Record<BuildArch, string> = {
  x86_64: 'cuda/x86_64/libcuda1/libcuda.so.535.261.03',
  aarch64: 'cuda/aarch64/libcuda1/libcuda.so.535.261.03',
};

interface Setup {
  readonly dir: string;
  /** The pristine tree: bin/cuda-app, NEEDED libcuda.so.1, no runpath. */
  readonly tree: string;
  /** --driver-link: the hook adds <driverLink>/lib, where a stand-in libcuda.so.1 says "driver". */
  readonly driverLink: string;
  /** A cuda_compat whose compat/libcuda.so.1 is a stand-in that says "compat". */
  readonly compatStandin: string;
  /** A cuda_compat whose compat/libcuda.so.1 is the real NVIDIA library of the architecture. */
  readonly compatReal: string;
  /** A cuda_compat without a libcuda.so.1. */
  readonly compatEmpty: string;
}

async function setUp(arch: BuildArch, dir: string): Promise<Setup> {
  const source = await writeSources(join(dir, 'src'), { 'which.c': WHICH_C, 'standin.c': STANDIN_C });
  const standin = (path: string, which: string): Promise<string> =>
    compileLibrary(path, source('standin.c'), { arch, soname: 'libcuda.so.1', extra: [`-DWHICH="${which}"`] });
  const driverLink = join(dir, 'driver');
  const driverLibcuda = await standin(join(driverLink, 'lib', 'libcuda.so.1'), 'driver');
  const compatStandin = join(dir, 'cuda_compat-standin');
  await standin(join(compatStandin, 'compat', 'libcuda.so.1'), 'compat');
  const compatReal = join(dir, 'cuda_compat-real');
  await mkdir(join(compatReal, 'compat'), { recursive: true });
  await copyFile(fixture(REAL_LIBCUDA[arch]).path, join(compatReal, 'compat', 'libcuda.so.1'));
  const compatEmpty = join(dir, 'cuda_compat-empty');
  await mkdir(join(compatEmpty, 'compat'), { recursive: true });
  const tree = join(dir, 'pristine');
  await compileProgram(join(tree, 'bin', 'cuda-app'), source('which.c'), { arch, needs: [driverLibcuda] });
  return { dir, tree, driverLink, compatStandin, compatReal, compatEmpty };
}

let copies = 0;
/** A fresh copy of the pristine tree, patched by `apply` with the given hook flags. */
async function applied(setup: Setup, flags: string[]): Promise<string> {
  const tree = join(setup.dir, `copy-${++copies}`);
  await copyTree(setup.tree, tree);
  const result = await runCli(['apply', tree, ...flags], { timeoutMs: 60_000 });
  if (result.code !== 0) throw new Error(`apply ${flags.join(' ')} exited ${String(result.code)}: ${result.stderr}`);
  return join(tree, 'bin', 'cuda-app');
}

/** From LD_DEBUG=libs output: the search path ld.so used for libcuda.so.1 and the files it tried. */
function libcudaSearch(stderr: string): { searchPath: string; tried: string[] } {
  const lines = stderr.split('\n');
  const start = lines.findIndex((line) => /find library=libcuda\.so\.1 \[\d+\]; searching/.test(line));
  if (start < 0) throw new Error(`LD_DEBUG output has no search for libcuda.so.1:\n${stderr}`);
  const searchLine = lines.slice(start + 1).find((line) => line.includes('search path='));
  const searchPath = /search path=(\S+)\s+\(RUNPATH from file /.exec(searchLine ?? '')?.[1];
  if (searchPath === undefined) throw new Error(`no RUNPATH search path after the libcuda.so.1 search:\n${stderr}`);
  const tried: string[] = [];
  for (const line of lines.slice(start + 1)) {
    if (/find library=/.test(line)) break;
    const match = /trying file=(\S+)/.exec(line);
    if (match?.[1] !== undefined) tried.push(match[1]);
  }
  return { searchPath, tried };
}

describeEachBuildArch('order-is-real', ['gcc', 'aarch64-linux-gnu-gcc', 'qemu-aarch64', 'readelf', 'cp'], setUp, (setup, arch) => {
  it('the pristine program has no runpath and cannot find libcuda.so.1 on its own', async () => {
    const facts = await readDynamic(join(setup.tree, 'bin', 'cuda-app'));
    expect(facts?.needed).toContain('libcuda.so.1');
    expect(facts === null ? null : tagKind(facts)).toBe('none');
    const result = await runOn(arch, join(setup.tree, 'bin', 'cuda-app'), []);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/libcuda\.so\.1: cannot open shared object file/);
  });

  it('with driver and cuda-compat, loads the compat libcuda.so.1 and searches compat before the driver', async () => {
    const app = await applied(setup, ['--driver-link', setup.driverLink, '--cuda-compat', setup.compatStandin]);
    const compatLib = join(setup.compatStandin, 'compat', 'libcuda.so.1');
    const run = await runOn(arch, app, []);
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe(`libcuda: ${compatLib}\nstandin: compat\n`);
    const debug = await runOn(arch, app, [], { LD_DEBUG: 'libs' });
    expect(debug.code).toBe(0);
    const { searchPath, tried } = libcudaSearch(debug.stderr);
    const compatAt = searchPath.indexOf(join(setup.compatStandin, 'compat'));
    const driverAt = searchPath.indexOf(join(setup.driverLink, 'lib'));
    expect(compatAt).toBeGreaterThanOrEqual(0);
    expect(driverAt).toBeGreaterThan(compatAt);
    // Found in compat: the driver directory is never even tried.
    expect(tried[tried.length - 1]).toBe(compatLib);
    expect(tried.filter((path) => path.startsWith(setup.driverLink))).toEqual([]);
  });

  it('with only the driver hook, loads the driver libcuda.so.1', async () => {
    const app = await applied(setup, ['--driver-link', setup.driverLink]);
    const run = await runOn(arch, app, []);
    expect(run.stdout).toBe(`libcuda: ${join(setup.driverLink, 'lib', 'libcuda.so.1')}\nstandin: driver\n`);
    const { searchPath } = libcudaSearch((await runOn(arch, app, [], { LD_DEBUG: 'libs' })).stderr);
    expect(searchPath).not.toContain('compat');
  });

  it('with both hooks and no libcuda.so.1 in compat, falls back to the driver one', async () => {
    const app = await applied(setup, ['--driver-link', setup.driverLink, '--cuda-compat', setup.compatEmpty]);
    const run = await runOn(arch, app, []);
    expect(run.stdout).toBe(`libcuda: ${join(setup.driverLink, 'lib', 'libcuda.so.1')}\nstandin: driver\n`);
    const { tried } = libcudaSearch((await runOn(arch, app, [], { LD_DEBUG: 'libs' })).stderr);
    expect(tried).toContain(join(setup.compatEmpty, 'compat', 'libcuda.so.1'));
    expect(tried[tried.length - 1]).toBe(join(setup.driverLink, 'lib', 'libcuda.so.1'));
  });

  it('with only cuda-compat (--no-driver), loads the compat libcuda.so.1', async () => {
    const app = await applied(setup, ['--no-driver', '--cuda-compat', setup.compatStandin]);
    const facts = await readDynamic(app);
    expect(facts?.runpath).toBe(join(setup.compatStandin, 'compat'));
    const run = await runOn(arch, app, []);
    expect(run.stdout).toBe(`libcuda: ${join(setup.compatStandin, 'compat', 'libcuda.so.1')}\nstandin: compat\n`);
  });

  it('cuda_compat itself gets the driver directory, never its own compat directory', async () => {
    const copy = join(setup.dir, 'cuda_compat-self');
    await copyTree(setup.compatStandin, copy);
    const result = await runCli(['apply', copy, '--driver-link', setup.driverLink, '--cuda-compat', copy, '--json'], { timeoutMs: 60_000 });
    expect(result.code).toBe(0);
    const facts = await readDynamic(join(copy, 'compat', 'libcuda.so.1'));
    expect(facts?.runpath).toBe(join(setup.driverLink, 'lib'));
    const report = JSON.parse(result.stdout) as { files: Array<{ entries?: Array<{ hook: string | null }> }> };
    expect(report.files.flatMap((f) => (f.entries ?? []).map((e) => e.hook))).toEqual(['driver']);
  });

  it('with a real NVIDIA libcuda.so.1 as cuda_compat, that one is the one loaded', async () => {
    const app = await applied(setup, ['--driver-link', setup.driverLink, '--cuda-compat', setup.compatReal]);
    const realLib = join(setup.compatReal, 'compat', 'libcuda.so.1');
    const listed = await ldList(app, arch);
    expect(listed).toMatch(new RegExp(`^\\s*libcuda\\.so\\.1 => ${realLib.replace(/[.+]/g, '\\$&')} \\(`, 'm'));
    expect(listed).not.toContain(setup.driverLink);
    const debug = await runOn(arch, app, [], { LD_DEBUG: 'libs' });
    const { tried } = libcudaSearch(debug.stderr);
    expect(tried[tried.length - 1]).toBe(realLib);
    // It is mapped and the program runs; it is not a stand-in, so there is no standin line.
    const run = await runOn(arch, app, []);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`libcuda: ${realLib}\n`);
  });
});
