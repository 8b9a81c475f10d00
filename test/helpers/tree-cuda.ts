// Builds, in a temp directory, a tree shaped like the output of a CUDA package: per architecture a bin/
// with compiled programs, a lib/ with real CUDA, Debian and compiled libraries, their soname symlinks, a
// lib/stubs/libcuda.so, a static archive, a relocatable object, a static executable, headers, docs and a
// few awkward entries (an empty file, a three-byte "\x7fEL", dangling and directory symlinks, a hard link,
// an absolute symlink to a file outside the tree). Each entry says what `apply` must do with it, so a test
// can derive the exact summary without asking the tool.

import { copyFile, link, mkdir, symlink, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { BuildArch } from './arch.js';
import { compilerFor, crossTool, cudaFixture, fixture, loadManifest, GREETING, type Fixture } from './fixtures.js';
import { compileLibrary, compileProgram } from './compile.js';
import { mustExec } from './exec.js';

/** What apply/check/plan must do with an entry. */
export type Expectation = 'dynamic' | 'symlink' | 'not-elf' | 'archive' | 'relocatable' | 'static';

export interface TreeEntry {
  /** Path relative to the tree root, `/`-separated. */
  readonly rel: string;
  readonly expect: Expectation;
  readonly arch?: BuildArch;
  /** Names of one inode: the walk patches one of them and skips the others as `hard-link`. */
  readonly hardLinkGroup?: string;
  /** A program that must still run: the fixture it came from (for runProgram), what it prints, and the
   *  directory (relative to the root) to put on LD_LIBRARY_PATH when its runpath does not find libgreet. */
  readonly program?: { readonly fixture: Fixture; readonly expectedOutput: string; readonly libraryDir: string | null };
  /** A shared library that must still load (ld.so --list) with the arch's lib/ on the library path. */
  readonly library?: boolean;
}

export interface CudaTree {
  readonly root: string;
  readonly entries: readonly TreeEntry[];
  /** The file an absolute symlink in the tree points at: outside the tree, it must never change. */
  readonly outsideFile: string;
}

export interface CudaTreeOptions {
  readonly arches: readonly BuildArch[];
  /** Add libcublas (≈100 MB per arch) and the libcublasLt stand-in it needs. */
  readonly large: boolean;
  /** Scratch directory for objects compiled on the way (not part of the tree). */
  readonly scratch: string;
  /** Add a library without section headers (patchelf 0.14 cannot read those). Default true. */
  readonly sectionless?: boolean;
}

/** A runpath entry that points into a link-time stubs directory, as a CUDA build leaves behind. */
export const STUBS_ENTRY = '/nix/store/0000000000000000000000000000000a-cuda_cudart-static/lib/stubs';

const variantOf: Record<BuildArch, { main: string; small: string; deb: string; triple: string }> = {
  x86_64: { main: 'x86_64', small: 'x86_64', deb: 'amd64', triple: 'x86_64-linux-gnu' },
  aarch64: { main: 'aarch64-64k', small: 'aarch64-4k', deb: 'arm64', triple: 'aarch64-linux-gnu' },
};

function sourceFile(name: string): string {
  const path = join(loadManifest().cacheDir, '..', 'src', name);
  if (!existsSync(path)) throw new Error(`fixture source ${path} is missing`);
  return path;
}

function debianFixture(arch: BuildArch, pkg: string, file: string): Fixture {
  return fixture(`debian/${arch}/${pkg}/${file}`);
}

/**
 * What a test over a CUDA-shaped tree works in, below its directory WORK: WORK/cuda_compat, the package
 * `--cuda-compat` names (its compat/ directory made), and the tree built at WORK/pristine, with
 * WORK/scratch for what is compiled on the way.
 */
export async function cudaTreeIn(work: string, options: Omit<CudaTreeOptions, 'scratch'>): Promise<{ compat: string; tree: CudaTree }> {
  const compat = join(work, 'cuda_compat');
  await mkdir(join(compat, 'compat'), { recursive: true });
  return { compat, tree: await buildCudaTree(join(work, 'pristine'), { ...options, scratch: join(work, 'scratch') }) };
}

async function buildCudaTree(root: string, options: CudaTreeOptions): Promise<CudaTree> {
  const entries: TreeEntry[] = [];
  await mkdir(root, { recursive: true });
  const put = async (rel: string, from: string, entry: Omit<TreeEntry, 'rel'>): Promise<void> => {
    await mkdir(dirname(join(root, rel)), { recursive: true });
    await copyFile(from, join(root, rel));
    entries.push({ rel, ...entry });
  };
  const text = async (rel: string, content: string | Uint8Array, mode = 0o644): Promise<void> => {
    await mkdir(dirname(join(root, rel)), { recursive: true });
    await writeFile(join(root, rel), content, { mode });
    entries.push({ rel, expect: 'not-elf' });
  };
  const softLink = async (rel: string, target: string): Promise<void> => {
    await mkdir(dirname(join(root, rel)), { recursive: true });
    await symlink(target, join(root, rel));
    entries.push({ rel, expect: 'symlink' });
  };

  const outsideDir = join(options.scratch, 'outside');
  await mkdir(outsideDir, { recursive: true });
  const outsideFile = join(outsideDir, 'libgreet.so.1');
  await copyFile(fixture('compiled/x86_64/libgreet').path, outsideFile);
  await text('nix-support/setup-hook', 'addToSearchPath CUDA_PATH "@out@"\n');
  await softLink('nix-support/libexternal.so.1', outsideFile);

  for (const arch of options.arches) {
    const v = variantOf[arch];
    const a = (rel: string): string => `${arch}/${rel}`;
    const compiled = (variant: string, name: string): Fixture => fixture(`compiled/${variant}/${name}`);
    const program = async (rel: string, f: Fixture, libraryDir: string | null = null): Promise<void> => {
      if (f.expectedOutput === null) throw new Error(`${f.id} has no expected output`);
      await put(a(rel), f.path, { expect: 'dynamic', arch, program: { fixture: f, expectedOutput: f.expectedOutput, libraryDir } });
    };
    const library = (rel: string, from: string, extra: Partial<TreeEntry> = {}): Promise<void> =>
      put(a(rel), from, { expect: 'dynamic', arch, library: true, ...extra });

    // Programs: RUNPATH, RPATH, none, other linkers, a non-PIE executable, C++ exceptions through lib/.
    await program('bin/pie-runpath', compiled(v.main, 'pie-runpath'));
    await program('bin/exec-rpath', compiled(v.small, 'exec-rpath'));
    await program('bin/pie-no-runpath', compiled(v.main, 'pie-no-runpath'), a('lib'));
    await program('bin/pie-runpath-lld', compiled(v.main, 'pie-runpath-lld'));
    await program('bin/pie-runpath-gold', compiled(v.small, 'pie-runpath-gold'));
    await program('bin/cxx-throw', compiled(v.main, 'cxx-throw'));
    await put(a('bin/static'), compiled(v.small, 'static').path, { expect: 'static', arch });
    await text(a('bin/cuda-run.sh'), '#!/bin/sh\nexec "$(dirname "$0")/pie-runpath" "$@"\n', 0o755);
    await softLink(a('bin/prog'), 'pie-runpath');

    // Compiled libraries of every runpath kind and layout.
    await library('lib/libgreet.so.1', compiled(v.main, 'libgreet').path);
    await softLink(a('lib/libgreet.so'), 'libgreet.so.1');
    await library('lib/libuser.so', compiled(v.main, 'libuser-runpath').path);
    await library('lib/libuser-rpath.so', compiled(v.small, 'libuser-rpath').path);
    await library('lib/libuser-lld.so', compiled(v.main, 'libuser-runpath-lld').path);
    if (options.sectionless !== false) await library('lib/libuser-nosections.so', compiled(v.main, 'no-sections').path);
    await library('lib/libbig.so', compiled(v.main, 'big-dynstr').path);
    await library('lib/libthrow.so', join(dirname(compiled(v.main, 'cxx-throw').path), '..', 'lib', 'libthrow.so'));

    // Binaries whose link left a stubs directory in the runpath (remove-stubs must drop it), one
    // with DT_RUNPATH and one with DT_RPATH.
    const scratch = join(options.scratch, arch);
    await mkdir(scratch, { recursive: true });
    const greet = join(root, a('lib'), 'libgreet.so.1');
    const stubsUser = join(scratch, 'stubs-user');
    await compileProgram(stubsUser, sourceFile('prog.c'), { arch, needs: [greet], runpath: `$ORIGIN/../lib:${STUBS_ENTRY}` });
    // runProgram only needs a fixture of the right architecture; the path is the tree's.
    await put(a('bin/stubs-user'), stubsUser, {
      expect: 'dynamic',
      arch,
      program: { fixture: compiled(v.main, 'pie-runpath'), expectedOutput: GREETING, libraryDir: null },
    });
    const stubsLib = join(scratch, 'libstubs-rpath.so');
    await compileLibrary(stubsLib, sourceFile('user.c'), { arch, soname: null, needs: [greet], rpath: `${STUBS_ENTRY}:$ORIGIN` });
    await library('lib/libstubs-rpath.so', stubsLib);

    // A relocatable object and a static archive of it.
    const object = join(scratch, 'greet.o');
    await mustExec(compilerFor(arch), ['-c', '-fPIC', '-O1', '-o', object, sourceFile('greet.c')]);
    await put(a('lib/greet.o'), object, { expect: 'relocatable', arch });
    const archive = join(scratch, 'libgreet_static.a');
    await mustExec(crossTool(arch, 'ar'), ['rcs', archive, object]);
    await put(a('lib/libgreet_static.a'), archive, { expect: 'archive', arch });

    // Real CUDA 11.8 libraries with their soname links; the driver's libcuda as the link-time stub.
    const cudart = cudaFixture(arch, 'libcudart11.0');
    await library('lib/libcudart.so.11.8.89', cudart.path);
    await softLink(a('lib/libcudart.so.11.0'), 'libcudart.so.11.8.89');
    await softLink(a('lib/libcudart.so'), 'libcudart.so.11.0');
    const nvtx = cudaFixture(arch, 'libnvtoolsext1');
    await library('lib/libnvToolsExt.so.1.0.0', nvtx.path, { hardLinkGroup: `${arch}-nvtx` });
    await softLink(a('lib/libnvToolsExt.so.1'), 'libnvToolsExt.so.1.0.0');
    await mkdir(join(root, a('share/nvtx')), { recursive: true });
    await link(join(root, a('lib/libnvToolsExt.so.1.0.0')), join(root, a('share/nvtx/libnvToolsExt.so.1.0.0')));
    entries.push({ rel: a('share/nvtx/libnvToolsExt.so.1.0.0'), expect: 'dynamic', arch, library: true, hardLinkGroup: `${arch}-nvtx` });
    if (options.large) {
      await library('lib/libcublas.so.11.11.3.6', cudaFixture(arch, 'libcublas11').path);
      await softLink(a('lib/libcublas.so.11'), 'libcublas.so.11.11.3.6');
      await library('lib/libcublasLt.so.11', join(loadManifest().cacheDir, 'cuda', v.deb, 'stubs', 'libcublasLt.so.11'));
    }
    await library('lib/stubs/libcuda.so', cudaFixture(arch, 'libcuda1').path);

    // Debian libraries the programs above load from lib/ through $ORIGIN/../lib.
    await library('lib/libstdc++.so.6.0.30', debianFixture(arch, 'libstdc++6', 'libstdc++.so.6.0.30').path);
    await softLink(a('lib/libstdc++.so.6'), 'libstdc++.so.6.0.30');
    await library('lib/libgcc_s.so.1', debianFixture(arch, 'libgcc-s1', 'libgcc_s.so.1').path);
    await library('lib/libz.so.1.2.13', debianFixture(arch, 'zlib1g', 'libz.so.1.2.13').path);
    await softLink(a('lib/libz.so.1'), 'libz.so.1.2.13');
    await library('lib/libffi.so.8.1.2', debianFixture(arch, 'libffi8', 'libffi.so.8.1.2').path);

    // Things that are not dynamic ELF files.
    await text(a('include/cuda_runtime_api.h'), '#pragma once\nint cudaGetDeviceCount(int *count);\n');
    await text(a('include/crt/host_defines.h'), '#define __host__\n');
    await text(a('share/doc/README.md'), `# CUDA runtime (${arch})\n`);
    await text(a('lib/pkgconfig/cudart-11.8.pc'), 'Name: cudart\nLibs: -lcudart\n');
    await text(a('lib/empty.so'), new Uint8Array(0));
    await text(a('lib/libtruncated-magic.so'), Uint8Array.from([0x7f, 0x45, 0x4c]));
    await softLink(a('lib/libmissing.so'), 'libmissing.so.1');
    await softLink(a('lib64'), 'lib');
  }
  return { root, entries, outsideFile };
}

/** The tree's entries that `apply` patches, one per inode (the first name of each hard-link group). */
export function dynamicEntries(tree: CudaTree): TreeEntry[] {
  return tree.entries.filter((e) => e.expect === 'dynamic');
}

/** The summary's `skipped` counts the tree must produce. */
export function expectedSkips(tree: CudaTree): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const entry of tree.entries) if (entry.expect !== 'dynamic') counts[entry.expect] = (counts[entry.expect] ?? 0) + 1;
  const groups = new Map<string, number>();
  for (const entry of tree.entries)
    if (entry.hardLinkGroup !== undefined) groups.set(entry.hardLinkGroup, (groups.get(entry.hardLinkGroup) ?? 0) + 1);
  const extraNames = [...groups.values()].reduce((sum, n) => sum + n - 1, 0);
  if (extraNames > 0) counts['hard-link'] = extraNames;
  return counts;
}

/** Number of inodes `apply` patches. */
export function expectedPatched(tree: CudaTree): number {
  return dynamicEntries(tree).length - (expectedSkips(tree)['hard-link'] ?? 0);
}
