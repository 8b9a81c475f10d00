// A library that dlopens its sibling by name, cuDNN's way: libcudnn.so.9 holds "libcudnn_graph.so" and adds
// the major version, and the sibling it opens opens its own sibling (the engines) in turn, each found
// through its own $ORIGIN. Under two runpaths of the first library: its $ORIGIN first, and a directory
// holding other copies of the siblings first (what PyTorch's cuDNN met with the host's
// /usr/lib/x86_64-linux-gnu). doctor's dlopens name the files the real loader opens (LD_DEBUG=libs,files
// of the running program), and the second runpath is a runpath-shadows-own error on the library.

import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, normalize } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { doctorJson } from './helpers/doctor-run.js';
import { traceLoader } from './helpers/doctor-ld-debug.js';
import { mustExec } from './helpers/exec.js';
import { requireTool } from './helpers/fixtures.js';
import { assertCliBuilt } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';

let t = '';

beforeAll(async () => {
  assertCliBuilt();
  requireTool('gcc');
  t = await makeTempDir('doctor-sibling');
});

afterAll(async () => {
  if (t !== '') await rm(t, { recursive: true, force: true });
});

/**
 * system/ and pkg/lib/ each hold a build of libgraph.so.9 and libengine.so.9 (libgraph opens libengine,
 * through its $ORIGIN); pkg/lib/libmain.so.9 with `runpath` opens libgraph, and pkg/bin/app needs libmain.
 */
async function tree(
  name: string,
  runpath: (system: string) => string,
): Promise<{ app: string; main: string; system: string; pkg: string }> {
  const root = join(t, name);
  const src = join(root, 'src');
  const system = join(root, 'system');
  const pkg = join(root, 'pkg', 'lib');
  for (const dir of [src, system, pkg, join(root, 'pkg', 'bin')]) await mkdir(dir, { recursive: true });
  await writeFile(join(src, 'engine.c'), 'const char *engine_which(void) { return WHICH; }\n');
  await writeFile(
    join(src, 'graph.c'),
    '#include <dlfcn.h>\nconst char *graph_build = WHICH;\nconst char *graph_which(void) {\n  void *e = dlopen("libengine.so.9", RTLD_NOW);\n' +
      '  return e == 0 ? dlerror() : ((const char *(*)(void))dlsym(e, "engine_which"))();\n}\n',
  );
  // The name is put together at run time: .rodata holds "libgraph.so" and ".9", not "libgraph.so.9".
  await writeFile(
    join(src, 'main.c'),
    '#include <dlfcn.h>\n#include <stdio.h>\nstatic const char *stem = "libgraph.so";\nconst char *main_graph(void) {\n' +
      '  char name[32];\n  snprintf(name, sizeof name, "%s.%d", stem, 9);\n  void *g = dlopen(name, RTLD_NOW);\n' +
      '  if (g == 0) return dlerror();\n  return ((const char *(*)(void))dlsym(g, "graph_which"))();\n}\n',
  );
  await writeFile(
    join(src, 'app.c'),
    '#include <stdio.h>\nconst char *main_graph(void);\nint main(void) { puts(main_graph()); return 0; }\n',
  );
  const gcc = requireTool('gcc');
  for (const [dir, which] of [
    [system, 'system'],
    [pkg, 'pkg'],
  ] as const) {
    const engine = join(dir, 'libengine.so.9');
    await mustExec(gcc, ['-shared', '-fPIC', `-DWHICH="${which}"`, '-Wl,-soname,libengine.so.9', '-o', engine, join(src, 'engine.c')]);
    const graph = join(dir, 'libgraph.so.9');
    await mustExec(gcc, [
      '-shared',
      '-fPIC',
      `-DWHICH="${which}"`,
      '-Wl,-soname,libgraph.so.9',
      '-Wl,--enable-new-dtags,-rpath,$ORIGIN',
      '-o',
      graph,
      join(src, 'graph.c'),
    ]);
  }
  const main = join(pkg, 'libmain.so.9');
  await mustExec(gcc, [
    '-shared',
    '-fPIC',
    '-Wl,-soname,libmain.so.9',
    `-Wl,--enable-new-dtags,-rpath,${runpath(system)}`,
    '-o',
    main,
    join(src, 'main.c'),
    '-ldl',
  ]);
  const app = join(root, 'pkg', 'bin', 'app');
  await mustExec(gcc, ['-o', app, join(src, 'app.c'), main, '-Wl,--enable-new-dtags,-rpath,$ORIGIN/../lib']);
  return { app, main, system, pkg };
}

describe('a sibling dlopened by name', () => {
  it.each([
    ['its $ORIGIN first', (system: string) => `$ORIGIN:${system}`, 'pkg'],
    ['another copy first', (system: string) => `${system}:$ORIGIN`, 'system'],
  ])('%s: doctor names the copy the loader opens', async (name, runpath, expected) => {
    const { app, main, system, pkg } = await tree(name.replace(/\W/g, '-'), runpath);
    const trace = await traceLoader({ arch: 'x86_64', mode: 'run', path: app });
    expect(trace.stdout.trim(), trace.stderr).toBe(expected);
    const { json } = await doctorJson([app]);
    const report = json.files[0];
    // Paths as the loader spells them ($ORIGIN/../lib of the program), compared as directories.
    const from = expected === 'pkg' ? pkg : system;
    for (const [name, caller] of [
      ['libgraph.so.9', main],
      ['libengine.so.9', join(from, 'libgraph.so.9')],
    ] as const) {
      const real = trace.loads.find((load) => load.name === name);
      expect(normalize(real?.path ?? ''), name).toBe(join(from, name));
      const dlopen = report?.dlopen.find((record) => record.name === name && normalize(record.caller) === caller);
      expect(dlopen, JSON.stringify(report?.dlopen)).toMatchObject({ reason: 'sibling', path: real?.path });
    }
    const shadow = report?.findings.find((finding) => finding.code === 'runpath-shadows-own');
    expect(shadow?.severity).toBe(expected === 'system' ? 'error' : undefined);
  });
});
