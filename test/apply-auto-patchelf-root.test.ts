// apply --auto-patchelf --root: patching a tree for another system from this machine (an arm64 image
// on x86_64). The image is Debian's arm64 libc with a program in /opt/app and a library directory
// /opt/libs; --interpreter and --libs are the image's paths. What is written is what the image will
// read: the interpreter and runpath entries as the image names them, not this machine's paths into it.
// The program then runs under qemu-aarch64 with the image as its root, and without --root the same
// interpreter is a usage error that says how to patch for another system.

import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileLibrary, compileProgram, writeSources } from './helpers/compile.js';
import { execTool } from './helpers/exec.js';
import { requireTool, sysroot } from './helpers/fixtures.js';
import { interpreterOf, readDynamic } from './helpers/readelf.js';
import { assertCliBuilt, runCli, stderrLines } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { copyTree } from './helpers/tree-tools.js';

let work = '';
let image = '';

beforeAll(async () => {
  for (const tool of ['aarch64-linux-gnu-gcc', 'qemu-aarch64', 'readelf']) requireTool(tool);
  assertCliBuilt();
  work = await makeTempDir('auto-patchelf-root');
  image = join(work, 'image');
  await copyTree(sysroot('aarch64'), image);
  const source = await writeSources(join(work, 'src'), {
    'lib.c': 'const char *where(void) { return "from /opt/libs"; }\n',
    'prog.c': '#include <stdio.h>\nconst char *where(void);\nint main(void) { printf("%s\\n", where()); return 0; }\n',
  });
  const libwhere = await compileLibrary(join(image, 'opt', 'libs', 'libwhere.so.1'), source('lib.c'), { arch: 'aarch64' });
  await compileProgram(join(image, 'opt', 'app', 'bin', 'prog'), source('prog.c'), { arch: 'aarch64', needs: [libwhere] });
}, 120_000);

afterAll(async () => {
  if (work !== '') await rm(work, { recursive: true, force: true });
});

describe('--root', () => {
  it('writes the interpreter and the runpath as the image names them, and the program runs in the image', async () => {
    const tree = join(image, 'opt', 'app');
    const flags = ['--no-driver', '--auto-patchelf', '--root', image, '--interpreter', '/lib/ld-linux-aarch64.so.1', '--libs', '/opt/libs'];
    const result = await runCli(['apply', tree, ...flags]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`glibc's own libraries in ${join(image, 'usr', 'lib', 'aarch64-linux-gnu')}`);
    const prog = join(tree, 'bin', 'prog');
    expect(await interpreterOf(prog)).toBe('/lib/ld-linux-aarch64.so.1');
    expect((await readDynamic(prog))?.runpath).toBe('/opt/libs');
    const ran = await execTool(requireTool('qemu-aarch64'), ['-L', image, prog]);
    expect(ran.stdout.trim(), ran.stderr).toBe('from /opt/libs');
    const again = await runCli(['check', tree, ...flags]);
    expect(again.code, again.stdout + again.stderr).toBe(0);
  });

  it('without it, the image’s interpreter is a usage error saying how to patch for another system; trees outside it are refused', async () => {
    const tree = join(image, 'opt', 'app');
    const noRoot = await runCli(['plan', tree, '--auto-patchelf', '--interpreter', '/lib/ld-linux-aarch64.so.1']);
    expect(noRoot.code).toBe(2);
    expect(stderrLines(noRoot)).toEqual([
      'cuda-patchelf: /lib/ld-linux-aarch64.so.1: --interpreter: no such file (the interpreter of another system is read inside its ' +
        'root: --root DIR, and --interpreter as that system names it)',
    ]);
    const outside = await runCli(['plan', work, '--auto-patchelf', '--root', image]);
    expect(outside.code).toBe(2);
    expect(outside.stderr).toContain('with --root the trees are patched as that system sees them');
  });
});
