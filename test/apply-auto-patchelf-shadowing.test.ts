// What --auto-patchelf says it chose is what the loader opens (docs/auto-patchelf.md, "The order of the
// runpath"), on programs and libraries compiled here for x86_64 and aarch64, run natively and under
// qemu-aarch64 with no LD_LIBRARY_PATH:
//   - libA needs libpack.so.1 (only in the --libs directory d1: a name no system has, so that libc's
//     directory never provides it), then libfoo.so.1 (in the tree and in d1, two builds): the tree's copy is chosen, and written ahead of d1, which holds the other;
//   - libmain.so.9 (cuDNN's shape: runpath $ORIGIN) dlopens its sibling libgraph.so.9 by name, and
//     needs libpack.so.1 from d1, which holds another libgraph.so.9: its $ORIGIN stays ahead of d1;
//   - where no order keeps every rule (a --libs directory with its own libc.so.6, a runtime dependency
//     holding another copy), the file is an error naming the library and both directories, and it is
//     not written; under --nixpkgs-compat, whose order is the anchor's, a runpath that shadows fails
//     its proof, and `check` fails on a tree whose runpaths load another copy than the one chosen.

import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { BuildArch } from './helpers/arch.js';
import { chosenLoads, listedPaths } from './helpers/chosen-loads.js';
import { compileLibrary, compileProgram, type LinkOptions, writeSources } from './helpers/compile.js';
import { describeEachBuildArch } from './helpers/each-build-arch.js';
import { mustExec } from './helpers/exec.js';
import { listDependencies, loaderOf, requireTool, runOn } from './helpers/fixtures.js';
import { readDynamic } from './helpers/readelf.js';
import { runCli, stderrLines } from './helpers/run-cli.js';
import { copyTree, sha256File } from './helpers/tree-tools.js';

const SOURCES: Record<string, string> = {
  'which.c': 'const char *WHICH_FN(void) { return WHICH; }\n',
  'pack.c': 'int pack_stub(void) { return 1; }\n',
  'a.c': 'const char *foo_which(void);\nint pack_stub(void);\nconst char *a_which(void) { return pack_stub() ? foo_which() : "?"; }\n',
  'prog.c': '#include <stdio.h>\nconst char *a_which(void);\nint main(void) { printf("foo: %s\\n", a_which()); return 0; }\n',
  // cuDNN's way: the main library dlopens a sibling by its soname, found through its own $ORIGIN.
  'main.c': `#include <dlfcn.h>
int pack_stub(void);
const char *main_graph(void) {
  void *graph = dlopen("libgraph.so.9", RTLD_NOW);
  if (graph == 0 || pack_stub() != 1) return dlerror();
  const char *(*which)(void) = (const char *(*)(void))dlsym(graph, "graph_which");
  return which();
}
`,
  'app.c': '#include <stdio.h>\nconst char *main_graph(void);\nint main(void) { printf("graph: %s\\n", main_graph()); return 0; }\n',
};

interface Setup {
  readonly dir: string;
  /** The path of one of SOURCES, written under dir. */
  readonly source: (name: string) => string;
  /** The --libs directory: libpack.so.1, and other builds of libfoo.so.1 and libgraph.so.9. */
  readonly d1: string;
  /** bin/prog, bin/app, lib/libA.so, lib/libfoo.so.1, cudnn/lib/{libmain.so.9,libgraph.so.9}. */
  readonly tree: string;
  readonly interpreter: string;
  readonly flags: readonly string[];
}

async function setUp(arch: BuildArch, dir: string): Promise<Setup> {
  const source = await writeSources(join(dir, 'src'), SOURCES);
  const library = (path: string, file: string, options: LinkOptions = {}): Promise<string> =>
    compileLibrary(path, source(file), { ...options, arch });
  const program = (path: string, file: string, options: LinkOptions): Promise<string> =>
    compileProgram(path, source(file), { ...options, arch });
  const which = (fn: string, value: string): LinkOptions => ({ extra: [`-DWHICH_FN=${fn}`, `-DWHICH="${value}"`] });

  const d1 = join(dir, 'd1');
  const pack = await library(join(d1, 'libpack.so.1'), 'pack.c');
  await library(join(d1, 'libfoo.so.1'), 'which.c', which('foo_which', 'd1'));
  await library(join(d1, 'libgraph.so.9'), 'which.c', which('graph_which', 'd1'));

  const tree = join(dir, 'tree');
  const lib = join(tree, 'lib');
  const foo = await library(join(lib, 'libfoo.so.1'), 'which.c', which('foo_which', 'tree'));
  // DT_NEEDED in this order: libpack.so.1 (d1 only), then libfoo.so.1.
  const libA = await library(join(lib, 'libA.so'), 'a.c', { needs: [pack, foo] });
  await program(join(tree, 'bin', 'prog'), 'prog.c', { needs: [libA], extra: [`-Wl,-rpath-link,${lib}:${d1}`] });
  const cudnn = join(tree, 'cudnn', 'lib');
  await library(join(cudnn, 'libgraph.so.9'), 'which.c', which('graph_which', 'tree'));
  const main = await library(join(cudnn, 'libmain.so.9'), 'main.c', { needs: [pack], runpath: '$ORIGIN', extra: ['-ldl'] });
  await program(join(tree, 'bin', 'app'), 'app.c', { needs: [main], runpath: '$ORIGIN/../cudnn/lib', extra: [`-Wl,-rpath-link,${d1}`] });
  const interpreter = loaderOf(arch);
  const flags = ['--no-driver', '--auto-patchelf', '--libs', d1, '--interpreter', interpreter];
  return { dir, source, d1, tree, interpreter, flags };
}

let copies = 0;
async function copyOf(setup: Setup): Promise<string> {
  const copy = join(setup.dir, `copy-${++copies}`);
  await copyTree(setup.tree, copy);
  return copy;
}

const run = (args: readonly string[]) => runCli(args, { timeoutMs: 60_000 });
const runpathOf = async (file: string): Promise<string | null> => (await readDynamic(file))?.runpath ?? null;

const TOOLS = ['gcc', 'aarch64-linux-gnu-gcc', 'qemu-aarch64', 'readelf'];

describeEachBuildArch('auto-patchelf-shadowing', TOOLS, setUp, (setup, arch) => {
  it('before: the programs cannot load, and the copies in d1 differ from the tree’s', async () => {
    expect((await runOn(arch, join(setup.tree, 'bin', 'prog'), [])).code).not.toBe(0);
    expect(await sha256File(join(setup.d1, 'libfoo.so.1'))).not.toBe(await sha256File(join(setup.tree, 'lib', 'libfoo.so.1')));
  });

  it('the copy chosen from the tree is written ahead of d1, and it is the one that loads', async () => {
    const tree = await copyOf(setup);
    const planned = await run(['plan', tree, ...setup.flags]);
    expect(planned.code, planned.stderr).toBe(0);
    expect(planned.stdout).toContain(`${join(tree, 'lib')}  <- auto-patchelf (libfoo.so.1)`);
    const applied = await run(['apply', tree, ...setup.flags, '--json']);
    expect(applied.code, applied.stderr).toBe(0);
    // Before, the resolver wrote d1 first (libpack.so.1 comes first in DT_NEEDED): d1's libfoo.so.1 loaded.
    expect(await runpathOf(join(tree, 'lib', 'libA.so'))).toBe(`${join(tree, 'lib')}:${setup.d1}`);
    const listed = listedPaths((await listDependencies(join(tree, 'lib', 'libA.so'), arch)).stdout);
    expect(listed.get('libfoo.so.1')).toBe(join(tree, 'lib', 'libfoo.so.1'));
    const ran = await runOn(arch, join(tree, 'bin', 'prog'), []);
    expect(ran.stdout.trim(), ran.stderr).toBe('foo: tree');
    const loads = await chosenLoads(JSON.parse(applied.stdout), arch);
    expect(loads.mismatches).toEqual([]);
    expect(loads.dependencies).toBeGreaterThanOrEqual(4);
  });

  it("a library's $ORIGIN stays ahead of what it needs from d1: its sibling dlopened by name is the tree's", async () => {
    const tree = await copyOf(setup);
    const applied = await run(['apply', tree, ...setup.flags]);
    expect(applied.code, applied.stderr).toBe(0);
    expect(await runpathOf(join(tree, 'cudnn', 'lib', 'libmain.so.9'))).toBe(`$ORIGIN:${setup.d1}`);
    const ran = await runOn(arch, join(tree, 'bin', 'app'), []);
    expect(ran.stdout.trim(), ran.stderr).toBe('graph: tree');
  });

  it('a --libs directory that holds another libc.so.6: that file is an error naming both, and is not written; the others are', async () => {
    const tree = await copyOf(setup);
    const withLibc = join(setup.dir, `d1-with-libc-${copies}`);
    await copyTree(setup.d1, withLibc);
    await writeFile(join(withLibc, 'libc.so.6'), await readFile(join(setup.d1, 'libpack.so.1')));
    const libA = join(tree, 'lib', 'libA.so');
    const before = await sha256File(libA);
    const result = await run(['apply', tree, '--no-driver', '--auto-patchelf', '--libs', withLibc, '--interpreter', setup.interpreter]);
    expect(result.code).toBe(3);
    const line = stderrLines(result).find((l) => l.startsWith(`cuda-patchelf: ${libA}: `));
    expect(line).toMatch(
      /libc\.so\.6: libc's directory .* provides it, but the runpath entry .*d1-with-libc-\d+ holds another libc\.so\.6/,
    );
    expect(await sha256File(libA)).toBe(before);
    // prog needs libA alone, from the tree: it is patched.
    expect(await runpathOf(join(tree, 'bin', 'prog'))).toBe(join(tree, 'lib'));
  });

  it('a runtime dependency that holds another copy of a chosen library, or of an own library: an error naming both entries', async () => {
    const tree = await copyOf(setup);
    const prog = join(tree, 'bin', 'prog');
    const app = join(tree, 'bin', 'app');
    const appBefore = await sha256File(app);
    const result = await run(['apply', tree, ...setup.flags, '--runtime-dependencies', setup.d1]);
    expect(result.code).toBe(3);
    // prog resolves libA.so from the tree, and d1 holds no libA.so: it is patched (libA.so has no interpreter,
    // so no runtime dependencies).
    expect(await runpathOf(prog)).toBe(`${setup.d1}:${join(tree, 'lib')}`);
    // app's own entry holds libgraph.so.9, of which the runtime dependency, first, holds another.
    const appLine = stderrLines(result).find((l) => l.startsWith(`cuda-patchelf: ${app}: `)) ?? '';
    expect(appLine).toContain(`but ${setup.d1} holds another libgraph.so.9 and must come before it`);
    expect(await sha256File(app)).toBe(appBefore);
    // A program that needs libfoo.so.1 itself: the copy chosen in the tree cannot come before d1.
    const direct = join(setup.dir, `direct-${copies}`);
    await compileProgram(join(direct, 'bin', 'foo-user'), setup.source('prog.c'), {
      arch,
      needs: [join(setup.tree, 'lib', 'libA.so'), join(setup.tree, 'lib', 'libfoo.so.1')],
      extra: [`-Wl,-rpath-link,${setup.d1}`],
    });
    await copyTree(join(setup.tree, 'lib'), join(direct, 'lib'));
    const user = join(direct, 'bin', 'foo-user');
    const before = await sha256File(user);
    const refused = await run(['apply', direct, ...setup.flags, '--runtime-dependencies', setup.d1]);
    expect(refused.code).toBe(3);
    const line = stderrLines(refused).find((l) => l.startsWith(`cuda-patchelf: ${user}: `)) ?? '';
    expect(line).toContain(`libfoo.so.1 is chosen from ${join(direct, 'lib')}, but ${setup.d1} holds another libfoo.so.1`);
    expect(await sha256File(user)).toBe(before);
  });

  it('--nixpkgs-compat keeps the anchor’s order: where it shadows, the proof refuses the file', async () => {
    const tree = await copyOf(setup);
    const libA = join(tree, 'lib', 'libA.so');
    const before = await sha256File(libA);
    const result = await run(['apply', tree, ...setup.flags, '--nixpkgs-compat']);
    expect(result.code).toBe(3);
    const line = stderrLines(result).find((l) => l.startsWith(`cuda-patchelf: ${libA}: `)) ?? '';
    expect(line).toContain('the loader would not load what was chosen: libfoo.so.1: chosen');
    expect(line).toContain(`loaded ${join(setup.d1, 'libfoo.so.1')}, through ${setup.d1}/`);
    expect(await sha256File(libA)).toBe(before);
  });

  it('the proof names the directories as the text their bytes spell, ASCII or not', async () => {
    const tree = await copyOf(setup);
    const d1 = join(setup.dir, `d1-é-${copies}`);
    await copyTree(setup.d1, d1);
    const libA = join(tree, 'lib', 'libA.so');
    const result = await run([
      'apply',
      tree,
      '--no-driver',
      '--auto-patchelf',
      '--libs',
      d1,
      '--interpreter',
      setup.interpreter,
      '--nixpkgs-compat',
    ]);
    expect(result.code).toBe(3);
    const line = stderrLines(result).find((l) => l.startsWith(`cuda-patchelf: ${libA}: `)) ?? '';
    expect(line).toContain(`loaded ${join(d1, 'libfoo.so.1')}, through ${d1}/`);
  });

  it('check fails on a tree whose runpaths load another copy than the one chosen', async () => {
    const tree = await copyOf(setup);
    const libA = join(tree, 'lib', 'libA.so');
    // What the resolver used to write: d1 ahead of the tree.
    await mustExec(requireTool('patchelf'), ['--set-rpath', `${setup.d1}:${join(tree, 'lib')}`, libA]);
    const checked = await run(['check', tree, ...setup.flags]);
    expect(checked.code).toBe(1);
    expect(checked.stdout).toContain(libA);
    // Under --nixpkgs-compat that runpath is the one apply would write: nothing to change, and the proof fails.
    const compat = await run(['check', tree, ...setup.flags, '--nixpkgs-compat']);
    expect(compat.code).toBe(3);
    expect(stderrLines(compat).some((l) => l.startsWith(`cuda-patchelf: ${libA}: the loader would not load what was chosen`))).toBe(true);
  });
});
