// The differential of docs/auto-patchelf.md ("The order of the runpath") on real trees: Debian 12's
// x86_64 and arm64 libraries (the fixtures' "debian" set, ICU, LLVM, OpenCV, libxml2…), patched with
// --auto-patchelf against a --libs directory that holds what they need from outside the tree
// (libstdc++, libgcc_s and libGLdispatch, taken out of the tree: real copies) and other builds of
// eleven names the tree ships itself (planted: small libraries of the same names that are not the
// tree's). For every patched file, the real loader
// (`ld.so --list`, under qemu-aarch64 for arm64) must resolve each chosen dependency to the chosen
// file: the planted copies never load. Once with the interpreter's directory as libc's (Debian's, which
// holds more than glibc) and once with a directory of glibc alone.

import { copyFile, mkdir, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { BuildArch } from './helpers/arch.js';
import { type ApplyReport, chosenLoads } from './helpers/chosen-loads.js';
import { compileLibrary } from './helpers/compile.js';
import { describeEachBuildArch } from './helpers/each-build-arch.js';
import { CACHE_DIR, loaderOf, sysroot } from './helpers/fixtures.js';
import { effectiveRunpath, readDynamic } from './helpers/readelf.js';
import { runCli } from './helpers/run-cli.js';
import { copyTree } from './helpers/tree-tools.js';

/** Names the tree ships, of which the --libs directory holds other builds. */
const PLANTED = [
  'liblzma.so.5',
  'libz.so.1',
  'libtbb.so.12',
  'libgomp.so.1',
  'libicuuc.so.72',
  'libxml2.so.2',
  'libffi.so.8',
  'libbsd.so.0',
  'libmd.so.0',
  'libtinfo.so.6',
  'libX11.so.6',
];

const MULTIARCH: Record<BuildArch, string> = { x86_64: 'x86_64-linux-gnu', aarch64: 'aarch64-linux-gnu' };
const DEBIAN_ARCH: Record<BuildArch, string> = { x86_64: 'amd64', aarch64: 'arm64' };

interface Setup {
  readonly tree: string;
  readonly libs: string;
  readonly interpreter: string;
  /** A directory of glibc alone: links to the glibc libraries of the interpreter's directory. */
  readonly glibcOnly: string;
}

async function setUp(arch: BuildArch, dir: string): Promise<Setup> {
  const tree = join(dir, 'tree');
  await mkdir(dir, { recursive: true });
  await copyTree(join(CACHE_DIR, 'debian', DEBIAN_ARCH[arch]), tree);
  const libs = join(dir, 'libs');
  await mkdir(libs, { recursive: true });
  // A library the tree needs from outside it, first of libGLX's DT_NEEDED: the --libs directory comes
  // first in libGLX's base order, ahead of the tree's libX11.so.6, of which it holds another build.
  const treeLib = join(tree, 'usr', 'lib', MULTIARCH[arch]);
  await copyFile(join(treeLib, 'libGLdispatch.so.0'), join(libs, 'libGLdispatch.so.0'));
  for (const name of ['libGLdispatch.so.0', 'libGLdispatch.so.0.0.0']) await rm(join(treeLib, name));
  // What the tree needs from outside it: the C++ runtime, real.
  const runtime =
    arch === 'x86_64'
      ? join(CACHE_DIR, 'debian', 'amd64-base', 'usr', 'lib', MULTIARCH[arch])
      : join(sysroot(arch), 'usr', 'lib', MULTIARCH[arch]);
  for (const name of ['libstdc++.so.6', 'libgcc_s.so.1']) await copyFile(join(runtime, name), join(libs, name));
  const source = join(dir, 'planted.c');
  await writeFile(source, 'int planted_stand_in(void) { return 1; }\n');
  for (const name of PLANTED) await compileLibrary(join(libs, name), source, { arch });
  const interpreter = loaderOf(arch);
  const glibcOnly = join(dir, 'glibc');
  await mkdir(glibcOnly);
  const libcDir = arch === 'x86_64' ? `/usr/lib/${MULTIARCH[arch]}` : join(sysroot(arch), 'usr', 'lib', MULTIARCH[arch]);
  for (const name of await readdir(libcDir)) {
    if (/^(ld-linux.*|lib(c|m|dl|rt|pthread|util|resolv|anl|mvec|BrokenLocale|c_malloc_debug|thread_db))\.so\.\d+$/.test(name))
      await symlink(join(libcDir, name), join(glibcOnly, name));
  }
  return { tree, libs, interpreter, glibcOnly };
}

describeEachBuildArch('auto-patchelf-planted', ['gcc', 'aarch64-linux-gnu-gcc', 'qemu-aarch64', 'readelf'], setUp, (setup, arch) => {
  it.each([
    ['the interpreter’s directory (Debian’s: more than glibc)', false],
    ['a directory of glibc alone', true],
  ])('libc’s directory: %s. Every chosen dependency loads from the chosen file', async (_, glibcOnly) => {
    const tree = join(setup.tree, '..', `copy-${glibcOnly ? 'glibc' : 'debian'}`);
    await copyTree(setup.tree, tree);
    const libc = glibcOnly ? ['--libc-dir', setup.glibcOnly] : [];
    const flags = ['--no-driver', '--auto-patchelf', '--libs', setup.libs, '--interpreter', setup.interpreter, ...libc, '--json'];
    const result = await runCli(['apply', tree, ...flags], { timeoutMs: 120_000 });
    expect([0, 3], result.stderr).toContain(result.code);
    const report = JSON.parse(result.stdout) as ApplyReport;
    expect(report.files.filter((file) => file.status === 'failed')).toEqual([]);
    const loads = await chosenLoads(report, arch);
    expect(loads.mismatches).toEqual([]);
    expect(loads.files).toBeGreaterThan(20);
    expect(loads.dependencies).toBeGreaterThanOrEqual(50);
    // The --libs directory is on runpaths (for libstdc++), and after every directory of the tree there.
    let behind = 0;
    for (const file of report.files.filter((f) => (f.resolved ?? []).some((r) => r.dir === setup.libs))) {
      const entries = (effectiveRunpath((await readDynamic(file.path)) ?? ({} as never)) ?? '').split(':');
      const at = entries.indexOf(setup.libs);
      expect(at, `${file.path}: ${entries.join(':')}`).toBeGreaterThanOrEqual(0);
      expect(
        entries.slice(at + 1).filter((entry) => entry.startsWith(tree)),
        `${file.path}: ${entries.join(':')}`,
      ).toEqual([]);
      behind++;
    }
    expect(behind).toBeGreaterThan(5);
  });
});
