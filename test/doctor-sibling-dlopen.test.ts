// A library that dlopens its sibling by name (cuDNN's way: libcudnn.so.9 opens libcudnn_graph.so.9, found
// through its own $ORIGIN), under two runpaths: its $ORIGIN first, and a directory holding another copy
// of the sibling first (what PyTorch's cuDNN met with the host's /usr/lib/x86_64-linux-gnu). doctor's
// dlopen of the sibling names the file the real loader opens (LD_DEBUG=libs,files of the running
// program), and the second runpath is a runpath-shadows-own error on the library.

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

/** system/libgraph.so.9 and pkg/lib/libgraph.so.9 (two builds), pkg/lib/libmain.so.9 with `runpath`, and pkg/bin/app. */
async function tree(
  name: string,
  runpath: (system: string) => string,
): Promise<{ app: string; main: string; system: string; pkg: string }> {
  const root = join(t, name);
  const src = join(root, 'src');
  const system = join(root, 'system');
  const pkg = join(root, 'pkg', 'lib');
  for (const dir of [src, system, pkg, join(root, 'pkg', 'bin')]) await mkdir(dir, { recursive: true });
  await writeFile(join(src, 'graph.c'), 'const char *graph_which(void) { return WHICH; }\n');
  await writeFile(
    join(src, 'main.c'),
    '#include <dlfcn.h>\nconst char *main_graph(void) {\n  void *g = dlopen("libgraph.so.9", RTLD_NOW);\n' +
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
    await mustExec(gcc, [
      '-shared',
      '-fPIC',
      `-DWHICH="${which}"`,
      '-Wl,-soname,libgraph.so.9',
      '-o',
      join(dir, 'libgraph.so.9'),
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
    // Paths as the loader spells them ($ORIGIN/../lib of the program), compared as directories.
    const real = trace.loads.find((load) => load.name === 'libgraph.so.9');
    expect(normalize(real?.path ?? '')).toBe(join(expected === 'pkg' ? pkg : system, 'libgraph.so.9'));
    const { json } = await doctorJson([app]);
    const report = json.files[0];
    const dlopen = report?.dlopen.find((record) => record.name === 'libgraph.so.9' && normalize(record.caller) === main);
    expect(dlopen, JSON.stringify(report?.dlopen)).toMatchObject({ reason: 'sibling', path: real?.path });
    const shadow = report?.findings.find((finding) => finding.code === 'runpath-shadows-own');
    expect(shadow?.severity).toBe(expected === 'system' ? 'error' : undefined);
  });
});
