// The trees autoPatchelf runs on (bench/auto-patchelf/assemble.sh lays them out) and, for each, the
// inputs both sides get: what the Nixpkgs hook would pass to auto-patchelf.py, and the same flags
// for `cuda-patchelf apply --auto-patchelf`.

import { spawn } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { isAbsolute, join, relative } from 'node:path';

const repoRoot = join(import.meta.dirname, '..', '..');
/** Everything assemble.sh builds, and the copies and results of every run. */
export const AP_CACHE = join(repoRoot, 'bench', '.cache', 'auto-patchelf');
const FIXTURES = process.env.CUDA_PATCHELF_FIXTURES_CACHE ?? join(repoRoot, 'fixtures', '.cache');
/** The closure benchmark's cache (bench/closure/assemble.sh): its tree and patchelf 0.18. */
const CLOSURE = process.env.CUDA_PATCHELF_BENCH_CACHE ?? join(repoRoot, 'bench', '.cache', 'closure');
/** What cuda_compat's directory is called in the closure benchmark (closure.ts). */
export const CUDA_COMPAT = '/nix/store/00000000000000000000000000000000-cuda_compat';
/** The entries the driver and cuda_compat hooks put ahead of the resolver's. */
export const DRIVER_DIRS: ReadonlySet<string> = new Set(['/run/opengl-driver/lib', `${CUDA_COMPAT}/compat`]);

/** Stand-ins for $NIX_BINTOOLS: the interpreter and the libc directory (nix-support/orig-libc + /lib). */
export type Bintools = 'x86_64' | 'x86_64-glibc' | 'aarch64';
export const PATCHELF_VERSIONS = ['0.14.3', '0.18'] as const;
export type PatchelfVersion = (typeof PATCHELF_VERSIONS)[number];

export interface AutoPatchelfCase {
  readonly name: string;
  readonly description: string;
  /** The pristine tree: every run works on a fresh copy of it. */
  readonly tree: string;
  /** --paths, relative to the copy. */
  readonly paths: readonly string[];
  readonly bintools: Bintools;
  /** --libs in order: relative to the copy, or absolute (read only). */
  readonly libs: readonly string[];
  readonly runtimeDependencies: readonly string[];
  readonly appendRpaths: readonly string[];
  readonly ignoreMissing: readonly string[];
  /** The cuda_compat hook and the stubs hook after autoPatchelf: the whole CUDA fixup. */
  readonly cudaFixup: boolean;
}

const trees = join(AP_CACHE, 'trees');
const fixtureLibs = {
  amd64: join(FIXTURES, 'debian', 'amd64', 'usr', 'lib', 'x86_64-linux-gnu'),
  arm64: join(FIXTURES, 'debian', 'arm64', 'usr', 'lib', 'aarch64-linux-gnu'),
  /** Debian's libstdc++ and libgcc_s (and a glibc, which the libc rule finds first). */
  amd64Gcc: join(FIXTURES, 'debian', 'amd64-base', 'usr', 'lib', 'x86_64-linux-gnu'),
};

export const bintoolsDir = (bintools: Bintools): string => join(AP_CACHE, 'bintools', bintools);
export const patchelfPathDir = (version: PatchelfVersion): string => join(AP_CACHE, 'patchelf', version);

/** The interpreter and the libc directory of a stand-in, as auto-patchelf.py reads them. */
export async function bintoolsFacts(bintools: Bintools): Promise<{ interpreter: string; libcDir: string }> {
  const read = async (name: string): Promise<string> => (await readFile(join(bintoolsDir(bintools), 'nix-support', name), 'utf8')).trim();
  return { interpreter: await read('dynamic-linker'), libcDir: join(await read('orig-libc'), 'lib') };
}

/**
 * What Nixpkgs' addAutoPatchelfSearchPath finds under a directory: every directory holding a `*.so*`
 * entry, here in byte order, relative to `root`.
 */
async function searchPath(root: string, under: string): Promise<string[]> {
  const entries = await readdir(join(root, under), { recursive: true });
  const dirs = new Set(entries.filter((entry) => /\.so/.test(entry.split('/').at(-1) ?? '')).map((entry) => join(under, entry, '..')));
  return [...dirs].sort();
}

/** Every case, the trees' own (assemble.sh) and the closure's fixup. */
async function autoPatchelfCases(): Promise<AutoPatchelfCase[]> {
  const plain = { runtimeDependencies: [], appendRpaths: [], ignoreMissing: [], cudaFixup: false };
  const nixLibs = [fixtureLibs.amd64Gcc, fixtureLibs.amd64];
  const packages = join(trees, 'packages');
  const packagesCase = async (arch: 'amd64' | 'arm64'): Promise<AutoPatchelfCase> => ({
    ...plain,
    name: `packages-${arch}`,
    description: `programs and libraries of six Debian packages, both architectures in the tree, ${arch} patched; four library packages and the fixtures' ${arch} libraries through --libs`,
    tree: packages,
    paths: ['out'],
    bintools: arch === 'amd64' ? 'x86_64-glibc' : 'aarch64',
    libs: [
      ...(await searchPath(packages, join('deps', arch))),
      ...(arch === 'amd64' ? [fixtureLibs.amd64Gcc, fixtureLibs.amd64] : [fixtureLibs.arm64]),
    ],
    runtimeDependencies: [join('deps', arch, 'libgegl-0.4-0', 'lib')],
    appendRpaths: ['/opt/append/lib'],
    ignoreMissing: ['libgtk*', 'libglib-*', 'libgobject-*'],
  });
  return [
    {
      ...plain,
      name: 'debian-600',
      description: "598 Debian x86_64 libraries, runpaths removed; libc directory: the host's /usr/lib/x86_64-linux-gnu",
      tree: join(trees, 'debian-600'),
      paths: ['out'],
      bintools: 'x86_64',
      libs: [],
    },
    {
      ...plain,
      name: 'debian-600-nix',
      description:
        "the same libraries; libc directory: glibc's alone (as on Nix), libstdc++ and the rest through --libs, the host's /usr/lib/x86_64-linux-gnu last",
      tree: join(trees, 'debian-600'),
      paths: ['out'],
      bintools: 'x86_64-glibc',
      libs: [...nixLibs, '/usr/lib/x86_64-linux-gnu'],
    },
    {
      ...plain,
      name: 'cuda',
      description:
        "libcublas, libcublasLt, libcudart, libnvrtc, libnvToolsExt (amd64, 0.7 GB), runpaths removed; the host's libc directory",
      tree: join(trees, 'cuda'),
      paths: ['out'],
      bintools: 'x86_64',
      libs: [],
    },
    {
      ...plain,
      name: 'cuda-nix',
      description: "the same CUDA libraries; glibc's libc directory, libstdc++ and libgcc_s through --libs (as on Nix)",
      tree: join(trees, 'cuda'),
      paths: ['out'],
      bintools: 'x86_64-glibc',
      libs: nixLibs,
    },
    {
      ...plain,
      name: 'cuda-toolkit-nix',
      description:
        "the CUDA 11.8 toolkit's libraries (25 Debian packages, amd64, 1.7 GB), runpaths removed; glibc's libc directory, libstdc++ and libgcc_s through --libs (as on Nix)",
      tree: join(trees, 'cuda-toolkit'),
      paths: ['out'],
      bintools: 'x86_64-glibc',
      libs: nixLibs,
    },
    {
      ...plain,
      name: 'cuda-nix-fixup',
      description:
        "cuda-nix's tree and inputs, the whole CUDA fixup: autoPatchelf, then the driver and cuda_compat hooks (the stubs hook finds nothing to remove)",
      tree: join(trees, 'cuda'),
      paths: ['out'],
      bintools: 'x86_64-glibc',
      libs: nixLibs,
      cudaFixup: true,
    },
    await packagesCase('amd64'),
    await packagesCase('arm64'),
    {
      ...plain,
      name: 'duplicate-soname',
      description:
        'libtbb.so.12 in three directories of the tree (one for arm64, one a link named otherwise than its target) and in --libs',
      tree: join(trees, 'duplicate-soname'),
      paths: ['out'],
      bintools: 'x86_64',
      libs: ['libs'],
    },
    {
      ...plain,
      name: 'origin',
      description: '`$ORIGIN` and `${ORIGIN}` runpaths on real libraries and a program',
      tree: join(trees, 'origin'),
      paths: ['out'],
      bintools: 'x86_64',
      libs: [],
      runtimeDependencies: ['/opt/runtime/lib'],
      appendRpaths: ['/opt/append/lib'],
    },
    {
      ...plain,
      name: 'shadowing',
      description:
        "one file for each place where the runpath's order or the libc rule decides: a file's own copy, a sibling its $ORIGIN holds, a --runtime-dependencies entry holding another copy, a library the host's libc directory holds too",
      tree: join(trees, 'shadowing'),
      paths: ['first', 'out'],
      bintools: 'x86_64',
      libs: ['deps/lib'],
      runtimeDependencies: ['rt/lib'],
    },
    {
      ...plain,
      name: 'closure',
      description:
        "the closure benchmark's tree (amd64 and arm64, 5.1 GB), x86_64 patched; glibc's libc directory, the fixtures' libraries through --libs, every missing library ignored",
      tree: join(CLOSURE, 'tree'),
      paths: ['.'],
      bintools: 'x86_64-glibc',
      libs: nixLibs,
      ignoreMissing: ['*'],
      cudaFixup: true,
    },
  ];
}

/** The cases named (all but the closure's when none is), or an error naming an unknown one. */
export async function pickCases(names: readonly string[]): Promise<AutoPatchelfCase[]> {
  const all = await autoPatchelfCases();
  if (names.length === 0) return all.filter((c) => c.name !== 'closure');
  return names.map((name) => {
    const found = all.find((c) => c.name === name);
    if (found === undefined) throw new Error(`unknown case ${name}: one of ${all.map((c) => c.name).join(', ')}`);
    return found;
  });
}

/** A case's path in the copy at `copy`: relative ones are the copy's, absolute ones stay. */
export const inCopy = (copy: string, path: string): string => (isAbsolute(path) ? path : join(copy, path));

/** A path written relative to the copy, `<tree>/...`, so that two copies compare; others unchanged. */
export function masked(copy: string, path: string): string {
  const rel = relative(copy, path);
  return rel === '' ? '<tree>' : rel.startsWith('..') || isAbsolute(rel) ? path : `<tree>/${rel}`;
}

/** Runs assemble.sh (which rebuilds only what changed) and checks the anchor script is there. */
export async function assemble(): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn('bash', [join(import.meta.dirname, 'assemble.sh')], { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`assemble.sh exited with ${code}`))));
  });
}
