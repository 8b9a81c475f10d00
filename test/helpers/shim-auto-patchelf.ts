// What the autoPatchelf hook tests resolve against, compiled with gcc for each test file: a Nix-like
// bintools (NIX_BINTOOLS with nix-support/dynamic-linker and orig-libc, over the host's glibc), a
// dependency package with lib/libdep.so, runtimeDependencies packages and an appendRunpaths directory
// holding libraries that the program dlopens by name, a directory for addAutoPatchelfSearchPath, and a
// library that no hook is told of (a missing dependency). The programs that need them are compiled by the
// build phase itself (`programBuild`), into the build's out output, with no runpath: only the hook can
// make them load.

import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { realpath } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { expect } from 'vitest';
import { execTool, mustExec, type ExecResult } from './exec.js';
import { requireTool } from './fixtures.js';
import { interpreterOf } from './readelf.js';
import { shellQuote, useBuiltBeforeAll, type Build } from './shim-stdenv.js';
import { makeTempDir } from './temp-dir.js';

/** The libraries a program can be linked against: each prints its name when called. */
export type LinkedLibrary = 'dep' | 'search' | 'missing';

export interface ResolverPackages extends Bintools {
  readonly root: string;
  /** A package for buildInputs: lib/libdep.so. */
  readonly dep: string;
  /** Packages for runtimeDependencies: lib/librtplugin.so (dlopened), the second's path with a space in it. */
  readonly runtime: string;
  readonly runtimeWithSpace: string;
  /** A directory for appendRunpaths: libappended.so (dlopened). */
  readonly appended: string;
  /** A directory for addAutoPatchelfSearchPath: nested/sub/libsearch.so. */
  readonly search: string;
  /** Where libmissing.so is, which no hook is told of. */
  readonly missing: string;
  readonly programSource: string;
}

const PROGRAM_SOURCE = `#include <dlfcn.h>
#include <stdio.h>
const char *dep_message(void);
const char *search_message(void);
const char *missing_message(void);
int main(int argc, char **argv) {
#ifdef USE_DEP
  puts(dep_message());
#endif
#ifdef USE_SEARCH
  puts(search_message());
#endif
#ifdef USE_MISSING
  puts(missing_message());
#endif
  for (int i = 1; i < argc; i++) printf("%s: %s\\n", argv[i], dlopen(argv[i], RTLD_NOW) != NULL ? "loaded" : "not found");
  return 0;
}
`;

async function compileLibrary(dir: string, name: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const source = join(dir, `${name}.c`);
  await writeFile(source, `const char *${name}_message(void) { return "${name}"; }\n`);
  await mustExec(requireTool('gcc'), ['-O2', '-shared', '-fPIC', `-Wl,-soname,lib${name}.so`, '-o', join(dir, `lib${name}.so`), source]);
  await rm(source);
}

/** What a Nix bintools wrapper tells of the libc: the paths of `makeBintools`. */
export interface Bintools {
  readonly bintools: string;
  readonly glibc: string;
  readonly interpreter: string;
}

/**
 * Under root: a glibc package whose lib/ is a link to the host's libc directory, and a bintools whose
 * nix-support names its interpreter (the host's, by that other path) and the glibc, as Nix's do.
 */
export async function makeBintools(root: string): Promise<Bintools> {
  const hostInterpreter = await interpreterOf(requireTool('gcc'));
  if (hostInterpreter === null) throw new Error('gcc has no interpreter to take the host glibc from');
  const glibc = join(root, 'glibc');
  await mkdir(glibc);
  await symlink(dirname(await realpath(hostInterpreter)), join(glibc, 'lib'));
  const interpreter = join(glibc, 'lib', basename(hostInterpreter));
  const bintools = join(root, 'bintools');
  await mkdir(join(bintools, 'nix-support'), { recursive: true });
  await writeFile(join(bintools, 'nix-support', 'dynamic-linker'), `${interpreter}\n`);
  await writeFile(join(bintools, 'nix-support', 'orig-libc'), `${glibc}\n`);
  return { bintools, glibc, interpreter };
}

async function buildResolverPackages(): Promise<ResolverPackages> {
  const root = await makeTempDir('shim-ap');
  const packages: ResolverPackages = {
    root,
    ...(await makeBintools(root)),
    dep: join(root, 'dep'),
    runtime: join(root, 'runtime'),
    runtimeWithSpace: join(root, 'runtime with space'),
    appended: join(root, 'appended'),
    search: join(root, 'search'),
    missing: join(root, 'missing'),
    programSource: join(root, 'program.c'),
  };
  await compileLibrary(join(packages.dep, 'lib'), 'dep');
  await compileLibrary(join(packages.runtime, 'lib'), 'rtplugin');
  await compileLibrary(join(packages.runtimeWithSpace, 'lib'), 'rtplugin');
  await compileLibrary(packages.appended, 'appended');
  await compileLibrary(join(packages.search, 'nested', 'sub'), 'search');
  await compileLibrary(packages.missing, 'missing');
  await writeFile(packages.programSource, PROGRAM_SOURCE);
  return packages;
}

/** For a test file: the packages, built before its tests and removed after them. */
export function useResolverPackages(): () => ResolverPackages {
  return useBuiltBeforeAll('the resolver packages', buildResolverPackages);
}

function libraryDir(packages: ResolverPackages, library: LinkedLibrary): string {
  switch (library) {
    case 'dep':
      return join(packages.dep, 'lib');
    case 'search':
      return join(packages.search, 'nested', 'sub');
    case 'missing':
      return packages.missing;
  }
}

/**
 * Build-phase code that compiles $out/bin/NAME, linked against LIBRARIES and libdl, with no runpath, as
 * cc-wrapper compiles (NIX_CFLAGS_COMPILE, --build-id when NIX_SET_BUILD_ID is 1).
 */
export function programBuild(packages: ResolverPackages, name: string, libraries: readonly LinkedLibrary[]): string {
  const link = libraries.flatMap((library) => [`-L${shellQuote(libraryDir(packages, library))}`, `-l${library}`]);
  const defines = libraries.map((library) => `-DUSE_${library.toUpperCase()}`);
  return [
    'mkdir -p "$out/bin" &&',
    'gcc ${NIX_CFLAGS_COMPILE-} $([[ ${NIX_SET_BUILD_ID-} == 1 ]] && echo -Wl,--build-id) -O2',
    ...defines,
    `-o "$out/bin/${name}" ${shellQuote(packages.programSource)} -Wl,--no-as-needed`,
    ...link,
    '-ldl',
  ].join(' ');
}

/** A program of the build's out output, run with no loader variables, with the names to dlopen. */
export function runProgram(build: Build, name: string, dlopen: readonly string[] = []): Promise<ExecResult> {
  return execTool(join(build.out, 'bin', name), dlopen, { env: { PATH: '/usr/bin:/bin', LC_ALL: 'C' }, timeoutMs: 30_000 });
}

/** The program ran, printed each linked library's name, and each dlopen said `loaded`. */
export function expectLoads(run: ExecResult, libraries: readonly LinkedLibrary[], dlopened: readonly string[] = []): void {
  const lines = [...libraries, ...dlopened.map((name) => `${name}: loaded`)];
  expect({ code: run.code, stdout: run.stdout, stderr: run.stderr }).toEqual({ code: 0, stdout: `${lines.join('\n')}\n`, stderr: '' });
}
