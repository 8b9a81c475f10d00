// apply --auto-patchelf on real programs and libraries, compiled here for x86_64 and aarch64, then RUN
// (natively, and under qemu-aarch64) with no LD_LIBRARY_PATH: what the resolver writes is what makes
// them load. The tree: bin/prog needs libA (dir1) and libdup (in dupX and dupY), dlopens libB (dir2,
// listed in its .note.dlopen) and needs lib/libtool.so, whose runpath `$ORIGIN:${ORIGIN}/../plugins`
// finds its sibling libsib.so. Also: a missing library with and without --ignore-missing, a driver-only
// library (libcuda.so.1) with the driver hook on and off, the hook flags in either order, the
// --nixpkgs-compat result against patchelf's own sequence, and a tree of NVIDIA's CUDA libraries.

import { copyFile, link, mkdir, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { BuildArch } from './helpers/arch.js';
import { compileLibrary, compileProgram, type LinkOptions, writeSources } from './helpers/compile.js';
import { describeEachBuildArch } from './helpers/each-build-arch.js';
import { mustExec } from './helpers/exec.js';
import { cudaFixture, ldList, loaderOf, requireTool, runOn } from './helpers/fixtures.js';
import { readDynamic, tagKind } from './helpers/readelf.js';
import { runCli, stderrLines, type CliResult } from './helpers/run-cli.js';
import { copyTree } from './helpers/tree-tools.js';

const SOURCES: Record<string, string> = {
  'a.c': 'int a(void) { return 1; }\n',
  'b.c': 'int b(void) { return 2; }\n',
  'dup.c': 'const char *dup_which(void) { return WHICH; }\n',
  'sib.c': 'int sib(void) { return 3; }\n',
  'tool.c': 'int sib(void);\nint tool(void) { return sib() + 10; }\n',
  'cuda.c': 'const char *cuda_which(void) { return WHICH; }\n',
  'gone.c': 'int gone(void) { return 4; }\n',
  // The FDO .note.dlopen (https://systemd.io/ELF_DLOPEN_METADATA/) as a program declares it: the
  // descriptor is the JSON text and its NUL, 4-byte padded (26 + 1 → 28).
  'prog.c': `#include <dlfcn.h>
#include <stdio.h>
int a(void);
int tool(void);
const char *dup_which(void);
__attribute__((section(".note.dlopen"), used, aligned(4))) static const struct {
  unsigned namesz, descsz, type;
  char name[4];
  char desc[28];
} dlopen_note = {4, 28, 0x407c0c0a, "FDO", "[{\\"soname\\":[\\"libB.so.1\\"]}]"};
int main(void) {
  void *b = dlopen("libB.so.1", RTLD_NOW);
  if (b == NULL) { printf("dlopen: %s\\n", dlerror()); return 1; }
  int (*bf)(void) = (int (*)(void))dlsym(b, "b");
  printf("a=%d tool=%d dup=%s b=%d\\n", a(), tool(), dup_which(), bf());
  return 0;
}
`,
  // A note whose JSON is not the specification's: `soname` must be an array.
  'bad-note.c': `__attribute__((section(".note.dlopen"), used, aligned(4))) static const struct {
  unsigned namesz, descsz, type;
  char name[4];
  char desc[28];
} dlopen_note = {4, 28, 0x407c0c0a, "FDO", "[{\\"soname\\":\\"libB.so.1\\"}]"};
int bad_note(void) { return 5; }
`,
  'needs.c': 'int a(void);\nint gone(void);\nint main(void) { return a() + gone() == 5 ? 0 : 1; }\n',
  'cuda-app.c':
    '#include <stdio.h>\nint a(void);\nconst char *cuda_which(void);\nint main(void) { printf("a=%d cuda=%s\\n", a(), cuda_which()); return 0; }\n',
};

interface Setup {
  readonly dir: string;
  /** The path of one of SOURCES, written under dir. */
  readonly source: (name: string) => string;
  readonly dir1: string;
  readonly dir2: string;
  /** Each holds a libdup.so.1 that says which it is. */
  readonly dupX: string;
  readonly dupY: string;
  /** bin/prog, lib/libtool.so, lib/libsib.so, plugins/. */
  readonly tree: string;
  /** bin/needs: libA.so.1 and libgone.so.1, which no directory given holds. */
  readonly missingTree: string;
  /** bin/cuda-app: libA.so.1 and libcuda.so.1, linked against stubs/libcuda.so.1. */
  readonly cudaTree: string;
  readonly stubs: string;
  /** --driver-link: its lib/libcuda.so.1 says "driver". */
  readonly driverLink: string;
  /** The loader of the architecture: --interpreter, and through it the libc directory. */
  readonly interpreter: string;
  /** The resolver's flags for the main tree: --libs dir1, dir2, dupX, dupY, and the architecture's interpreter. */
  readonly resolverFlags: readonly string[];
  /** The main tree's program's runpath as the resolver writes it, for a copy of the tree at `tree`. */
  readonly progRunpath: (tree: string, dup?: string) => string;
}

async function setUp(arch: BuildArch, dir: string): Promise<Setup> {
  const source = await writeSources(join(dir, 'src'), SOURCES);
  const library = (path: string, file: string, options: LinkOptions = {}): Promise<string> =>
    compileLibrary(path, source(file), { ...options, arch });
  const program = (path: string, file: string, needs: readonly string[], extra: readonly string[] = []): Promise<string> =>
    compileProgram(path, source(file), { arch, needs, extra });
  const dir1 = join(dir, 'dir1', 'lib');
  const dir2 = join(dir, 'dir2', 'lib');
  const libA = await library(join(dir1, 'libA.so.1'), 'a.c');
  const dupX = join(dir, 'dupX', 'lib');
  const dupY = join(dir, 'dupY', 'lib');
  const libdup = await library(join(dupX, 'libdup.so.1'), 'dup.c', { extra: ['-DWHICH="X"'] });
  await library(join(dupY, 'libdup.so.1'), 'dup.c', { extra: ['-DWHICH="Y"'] });
  await library(join(dir2, 'libB.so.1'), 'b.c');

  const tree = join(dir, 'tree');
  const libsib = await library(join(tree, 'lib', 'libsib.so'), 'sib.c');
  const libtool = await library(join(tree, 'lib', 'libtool.so'), 'tool.c', { needs: [libsib], runpath: '$ORIGIN:${ORIGIN}/../plugins' });
  await mkdir(join(tree, 'plugins'));
  await program(join(tree, 'bin', 'prog'), 'prog.c', [libA, libtool, libdup], ['-ldl']);

  const gone = join(dir, 'gone');
  const libgone = await library(join(gone, 'libgone.so.1'), 'gone.c');
  const missingTree = join(dir, 'missing-tree');
  await program(join(missingTree, 'bin', 'needs'), 'needs.c', [libA, libgone]);

  const stubs = join(dir, 'cuda', 'lib', 'stubs');
  const stub = await library(join(stubs, 'libcuda.so.1'), 'cuda.c', { extra: ['-DWHICH="stub"'] });
  const driverLink = join(dir, 'driver');
  await library(join(driverLink, 'lib', 'libcuda.so.1'), 'cuda.c', { extra: ['-DWHICH="driver"'] });
  const cudaTree = join(dir, 'cuda-tree');
  await program(join(cudaTree, 'bin', 'cuda-app'), 'cuda-app.c', [libA, stub]);

  const interpreter = loaderOf(arch);
  const resolverFlags = ['--auto-patchelf', ...[dir1, dir2, dupX, dupY].flatMap((d) => ['--libs', d]), '--interpreter', interpreter];
  // DT_NEEDED order (libA, libtool in the tree, libdup; libc by the interpreter's directory), then the dlopen note (libB).
  const progRunpath = (copy: string, dup = dupX): string => [dir1, join(copy, 'lib'), dup, dir2].join(':');
  return { dir, source, dir1, dir2, dupX, dupY, tree, missingTree, cudaTree, stubs, driverLink, interpreter, resolverFlags, progRunpath };
}

let copies = 0;
/** A fresh copy of a pristine tree. */
async function copyOf(setup: Setup, tree: string): Promise<string> {
  const copy = join(setup.dir, `copy-${++copies}`);
  await copyTree(tree, copy);
  return copy;
}

async function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { timeoutMs: 60_000 });
}

const runpathOf = async (file: string): Promise<string | null> => (await readDynamic(file))?.runpath ?? null;

const TOOLS = ['gcc', 'aarch64-linux-gnu-gcc', 'qemu-aarch64', 'readelf', 'patchelf'];

describeEachBuildArch('auto-patchelf', TOOLS, setUp, (setup, arch) => {
  it('the pristine program cannot load on its own', async () => {
    const run = await runOn(arch, join(setup.tree, 'bin', 'prog'), []);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/libA\.so\.1: cannot open shared object file/);
  });

  it('after apply, the program loads its libraries and the one it dlopens, with no LD_LIBRARY_PATH', async () => {
    const tree = await copyOf(setup, setup.tree);
    const result = await cli(['apply', tree, '--no-driver', ...setup.resolverFlags]);
    expect(result.code).toBe(0);
    // libdup.so.1 is in two --libs directories: the first given wins, and the run says so once.
    expect(stderrLines(result)).toEqual([
      `cuda-patchelf: warning: libdup.so.1 is in ${setup.dupX} and in ${setup.dupY}: ${join(setup.dupX, 'libdup.so.1')} is used (found first)`,
    ]);
    const prog = join(tree, 'bin', 'prog');
    expect(await runpathOf(prog)).toBe(setup.progRunpath(tree));
    const facts = await readDynamic(prog);
    expect(facts === null ? null : tagKind(facts)).toBe('RUNPATH');
    // libtool's $ORIGIN already names its sibling's directory, and ${ORIGIN}/../plugins is kept: unchanged.
    expect(await runpathOf(join(tree, 'lib', 'libtool.so'))).toBe('$ORIGIN:${ORIGIN}/../plugins');
    const run = await runOn(arch, prog, []);
    expect({ code: run.code, stdout: run.stdout, stderr: run.stderr }).toEqual({ code: 0, stdout: 'a=1 tool=13 dup=X b=2\n', stderr: '' });
    // Done: a second run changes nothing, and check agrees.
    const again = await cli(['check', tree, '--no-driver', ...setup.resolverFlags]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('cuda-patchelf check: nothing to do');
  });

  it('the order of --libs decides between two copies of one name, whatever the directories are called', async () => {
    const tree = await copyOf(setup, setup.tree);
    const libs = [setup.dupY, setup.dupX, setup.dir2, setup.dir1].flatMap((dir) => ['--libs', dir]);
    const result = await cli(['apply', tree, '--no-driver', '--auto-patchelf', ...libs, '--interpreter', setup.interpreter]);
    expect(result.code).toBe(0);
    expect(result.stderr).toContain(`${join(setup.dupY, 'libdup.so.1')} is used (found first)`);
    const prog = join(tree, 'bin', 'prog');
    expect(await runpathOf(prog)).toBe(setup.progRunpath(tree, setup.dupY));
    const run = await runOn(arch, prog, []);
    expect(run.stdout).toBe('a=1 tool=13 dup=Y b=2\n');
  });

  it('plan names the libraries behind each entry; --json reports them per file', async () => {
    const plan = await cli(['plan', setup.tree, ...setup.resolverFlags]);
    expect(plan.code).toBe(0);
    const lines = plan.stdout.split('\n');
    expect(lines).toContain(`    ${setup.dir1}  <- auto-patchelf (libA.so.1)`);
    expect(lines).toContain(`    ${setup.dupX}  <- auto-patchelf (libdup.so.1)`);
    expect(lines).toContain(`    ${join(setup.tree, 'lib')}  <- auto-patchelf (libtool.so)`);
    expect(lines).toContain(`    ${setup.dir2}  <- auto-patchelf (libB.so.1)`);
    expect(lines).toContain('    /run/opengl-driver/lib  <- driver');
    const json = await cli(['plan', setup.tree, ...setup.resolverFlags, '--json']);
    const report = JSON.parse(json.stdout) as {
      version: number;
      hooks: string[];
      summary: { autoPatchelf: { missing: number } };
      files: { path: string; resolved?: { dir: string; names: string[] }[]; missing?: string[][]; ignoredMissing?: string[][] }[];
    };
    expect(report.version).toBe(4);
    expect(report.hooks).toEqual(['auto-patchelf', 'driver']);
    expect(report.summary.autoPatchelf.missing).toBe(0);
    const prog = report.files.find((file) => file.path === join(setup.tree, 'bin', 'prog'));
    expect(prog?.resolved?.map(({ dir, names }) => ({ dir, names }))).toEqual([
      { dir: setup.dir1, names: ['libA.so.1'] },
      { dir: join(setup.tree, 'lib'), names: ['libtool.so'] },
      { dir: setup.dupX, names: ['libdup.so.1'] },
      { dir: setup.dir2, names: ['libB.so.1'] },
    ]);
    expect(prog?.missing).toEqual([]);
    expect(prog?.ignoredMissing).toEqual([]);
  });

  it('--relative-to-tree, --runtime-dependencies, --append-rpaths; a file of another machine and a malformed note left alone', async () => {
    const tree = await copyOf(setup, setup.tree);
    const other: BuildArch = arch === 'x86_64' ? 'aarch64' : 'x86_64';
    await compileLibrary(join(tree, 'lib', 'libother.so'), setup.source('a.c'), { arch: other, soname: null });
    await compileLibrary(join(tree, 'lib', 'libbadnote.so'), setup.source('bad-note.c'), { arch, soname: null });
    const extra = ['--relative-to-tree', '--runtime-dependencies', '/rt/lib', '--append-rpaths', '/app/lib'];
    const result = await cli(['apply', tree, '--no-driver', ...setup.resolverFlags, ...extra, '--json']);
    expect(result.code).toBe(0);
    expect(stderrLines(result)).toContain(
      `cuda-patchelf: warning: ${join(tree, 'lib', 'libbadnote.so')}: .note.dlopen note 1: entry 0: no "soname" array; ignored`,
    );
    expect(stderrLines(result)).toContain(
      'cuda-patchelf: note: --auto-patchelf left 1 file of another target to the other hooks (1 other-machine)',
    );
    // A program gets the runtime dependencies first; the tree's directory is written relative to the file.
    const prog = join(tree, 'bin', 'prog');
    expect(await runpathOf(prog)).toBe(['/rt/lib', setup.dir1, '$ORIGIN/../lib', setup.dupX, setup.dir2, '/app/lib'].join(':'));
    // A library has no interpreter: no runtime dependencies; its own $ORIGIN spelling and ${ORIGIN}/../plugins kept,
    // in their order, and --append-rpaths last.
    expect(await runpathOf(join(tree, 'lib', 'libtool.so'))).toBe('$ORIGIN:${ORIGIN}/../plugins:/app/lib');
    const report = JSON.parse(result.stdout) as {
      summary: { autoPatchelf: { skipped: Record<string, number> } };
      files: { path: string; status: string; reason?: string }[];
    };
    expect(report.summary.autoPatchelf.skipped).toEqual({ 'other-machine': 1 });
    expect(report.files.find((file) => file.path === join(tree, 'lib', 'libother.so'))).toMatchObject({
      status: 'skipped',
      reason: 'no-hook',
    });
    expect(await runpathOf(join(tree, 'lib', 'libother.so'))).toBeNull();
    expect((await runOn(arch, prog, [])).stdout).toBe('a=1 tool=13 dup=X b=2\n');
  });

  it('a missing library: one line naming the file and the library, exit 3, the file patched with the rest', async () => {
    const tree = await copyOf(setup, setup.missingTree);
    const needs = join(tree, 'bin', 'needs');
    // A second name of the same file: it is patched, and reported, through its first name only.
    await link(needs, join(tree, 'bin', 'needs-again'));
    const result = await cli(['apply', tree, '--no-driver', ...setup.resolverFlags]);
    expect(result.code).toBe(3);
    expect(stderrLines(result).filter((line) => line.includes('not found'))).toEqual([
      `cuda-patchelf: ${needs}: library libgone.so.1 not found`,
    ]);
    expect(await runpathOf(needs)).toBe(setup.dir1);
    const check = await cli(['check', tree, '--no-driver', ...setup.resolverFlags]);
    expect(check.code).toBe(3);
    expect(check.stdout).toContain('cuda-patchelf check: 1 missing library in 1 file, no other file needs patching');
    // With the library's directory given, a second run finishes the job, and the program runs.
    const fixed = await cli(['apply', tree, '--no-driver', ...setup.resolverFlags, '--libs', join(setup.dir, 'gone')]);
    expect(fixed.code).toBe(0);
    expect(await runpathOf(needs)).toBe(`${setup.dir1}:${join(setup.dir, 'gone')}`);
    expect((await runOn(arch, needs, [])).code).toBe(0);
  });

  it('--ignore-missing turns a missing library into a warning', async () => {
    const tree = await copyOf(setup, setup.missingTree);
    const needs = join(tree, 'bin', 'needs');
    const result = await cli(['apply', tree, '--no-driver', ...setup.resolverFlags, '--ignore-missing', 'libgo[n]e.so.*']);
    expect(result.code).toBe(0);
    expect(stderrLines(result)).toContain(`cuda-patchelf: warning: ${needs}: library libgone.so.1 not found (--ignore-missing)`);
    expect(await runpathOf(needs)).toBe(setup.dir1);
  });

  it("libcuda.so.1 is the driver hook's: the stubs directory is never written, and the driver's copy loads", async () => {
    const flags = ['--auto-patchelf', '--libs', setup.stubs, '--libs', setup.dir1, '--interpreter', setup.interpreter];
    const withDriver = await copyOf(setup, setup.cudaTree);
    const result = await cli(['apply', withDriver, '--driver-link', setup.driverLink, ...flags]);
    expect(result.code).toBe(0);
    const app = join(withDriver, 'bin', 'cuda-app');
    expect(await runpathOf(app)).toBe(`${join(setup.driverLink, 'lib')}:${setup.dir1}`);
    expect((await runOn(arch, app, [])).stdout).toBe('a=1 cuda=driver\n');
    // Without the driver hook nothing else provides it: the index's copy (here the stub) is used.
    const withoutDriver = await copyOf(setup, setup.cudaTree);
    expect((await cli(['apply', withoutDriver, '--no-driver', ...flags])).code).toBe(0);
    const stubApp = join(withoutDriver, 'bin', 'cuda-app');
    expect(await runpathOf(stubApp)).toBe(`${setup.dir1}:${setup.stubs}`);
    expect((await runOn(arch, stubApp, [])).stdout).toBe('a=1 cuda=stub\n');
  });

  it('the hook flags in either order give the same file: the resolver first, then driver and cuda-compat prepend', async () => {
    const compat = join(setup.dir, 'cuda_compat');
    const first = await copyOf(setup, setup.tree);
    const second = await copyOf(setup, setup.tree);
    expect((await cli(['apply', first, '--cuda-compat', compat, '--driver-link', setup.driverLink, ...setup.resolverFlags])).code).toBe(0);
    expect((await cli(['apply', ...setup.resolverFlags, second, '--driver-link', setup.driverLink, '--cuda-compat', compat])).code).toBe(0);
    const hooks = [join(compat, 'compat'), join(setup.driverLink, 'lib')];
    expect(await runpathOf(join(first, 'bin', 'prog'))).toBe([...hooks, setup.progRunpath(first)].join(':'));
    expect(await runpathOf(join(second, 'bin', 'prog'))).toBe([...hooks, setup.progRunpath(second)].join(':'));
    // The driver's entry leads, so a second apply finds nothing to do.
    expect((await cli(['check', first, '--cuda-compat', compat, '--driver-link', setup.driverLink, ...setup.resolverFlags])).code).toBe(0);
  });

  it('--nixpkgs-compat writes what patchelf --set-rpath R and then the driver hook write', async () => {
    const ours = await copyOf(setup, setup.tree);
    const result = await cli(['apply', ours, '--nixpkgs-compat', '--driver-link', setup.driverLink, ...setup.resolverFlags, '--json']);
    expect(result.code).toBe(0);
    const report = JSON.parse(result.stdout) as { files: { path: string; resolved?: { dir: string }[] }[] };
    const theirs = await copyOf(setup, setup.tree);
    const patchelf = requireTool('patchelf');
    for (const name of ['bin/prog', 'lib/libtool.so', 'lib/libsib.so']) {
      const file = join(theirs, name);
      // auto-patchelf.py: --set-rpath with the resolved directories (R), when there are any.
      const resolved = report.files.find((entry) => entry.path === join(ours, name))?.resolved ?? [];
      const r = resolved.map((entry) => entry.dir.replace(ours, theirs)).join(':');
      if (r !== '') await mustExec(patchelf, ['--set-rpath', r, file]);
      // Then autoAddDriverRunpath: the driver's directory before what the file has.
      const old = (await mustExec(patchelf, ['--print-rpath', file])).stdout.trim();
      await mustExec(patchelf, ['--set-rpath', `${join(setup.driverLink, 'lib')}:${old}`, file]);
      const [mine, nixpkgs] = [await readDynamic(join(ours, name)), await readDynamic(file)];
      expect(mine?.runpath?.replaceAll(ours, theirs), name).toBe(nixpkgs?.runpath);
      expect(mine === null ? null : tagKind(mine), name).toBe('RUNPATH');
    }
    expect(await runpathOf(join(ours, 'lib', 'libtool.so'))).toBe(`${join(setup.driverLink, 'lib')}:${join(ours, 'lib')}`);
    expect((await runOn(arch, join(ours, 'bin', 'prog'), [])).stdout).toBe('a=1 tool=13 dup=X b=2\n');
  });

  it("a tree of NVIDIA's CUDA libraries: each found where it is, the missing one named, libc left to the interpreter", async () => {
    const tree = join(setup.dir, 'cuda-libraries');
    const deps = join(setup.dir, 'cuda-deps', 'lib');
    await mkdir(join(tree, 'lib'), { recursive: true });
    await mkdir(deps, { recursive: true });
    await copyFile(cudaFixture(arch, 'libcublas11').path, join(tree, 'lib', 'libcublas.so.11.11.3.6'));
    await symlink('libcublas.so.11.11.3.6', join(tree, 'lib', 'libcublas.so.11'));
    await copyFile(cudaFixture(arch, 'libnvtoolsext1').path, join(tree, 'lib', 'libnvToolsExt.so.1'));
    await copyFile(cudaFixture(arch, 'libcudart11.0').path, join(deps, 'libcudart.so.11.0'));
    await compileProgram(join(tree, 'bin', 'app'), setup.source('needs.c'), {
      arch,
      needs: [
        join(setup.dir1, 'libA.so.1'),
        join(setup.dir, 'gone', 'libgone.so.1'),
        join(tree, 'lib', 'libcublas.so.11'),
        join(deps, 'libcudart.so.11.0'),
        join(tree, 'lib', 'libnvToolsExt.so.1'),
      ],
      extra: ['-Wl,--allow-shlib-undefined'],
    });
    const libs = ['--libs', deps, '--libs', setup.dir1, '--libs', join(setup.dir, 'gone')];
    const flags = ['--driver-link', setup.driverLink, '--auto-patchelf', '--interpreter', setup.interpreter, ...libs];
    const result = await cli(['apply', tree, ...flags]);
    // libcublas needs libcublasLt.so.11, which these packages do not hold.
    expect(result.code).toBe(3);
    expect(stderrLines(result).filter((line) => !line.includes('warning'))).toEqual([
      `cuda-patchelf: ${join(tree, 'lib', 'libcublas.so.11.11.3.6')}: library libcublasLt.so.11 not found`,
    ]);
    const app = join(tree, 'bin', 'app');
    const driver = join(setup.driverLink, 'lib');
    expect(await runpathOf(app)).toBe([driver, setup.dir1, join(setup.dir, 'gone'), join(tree, 'lib'), deps].join(':'));
    // Nothing resolved for libcublas (its libc-side libraries are the interpreter's): its own $ORIGIN stays, behind the driver.
    expect(await runpathOf(join(tree, 'lib', 'libcublas.so.11.11.3.6'))).toBe(`${driver}:$ORIGIN`);
    // Given a directory holding libcublasLt.so.11 (a stand-in), a second run finishes: $ORIGIN is still there.
    const lt = join(setup.dir, 'cublasLt', 'lib');
    await compileLibrary(join(lt, 'libcublasLt.so.11'), setup.source('b.c'), { arch });
    const again = await cli(['apply', tree, ...flags, '--libs', lt]);
    expect(again.code).toBe(0);
    expect(await runpathOf(join(tree, 'lib', 'libcublas.so.11.11.3.6'))).toBe(`${driver}:${lt}:$ORIGIN`);
    const listed = await ldList(app, arch);
    expect(listed).toContain(`libcublas.so.11 => ${join(tree, 'lib', 'libcublas.so.11')}`);
    expect(listed).toContain(`libcudart.so.11.0 => ${join(deps, 'libcudart.so.11.0')}`);
    expect(listed).toContain(`libnvToolsExt.so.1 => ${join(tree, 'lib', 'libnvToolsExt.so.1')}`);
    expect(listed).toContain(`libcublasLt.so.11 => ${join(lt, 'libcublasLt.so.11')}`);
  });
});
