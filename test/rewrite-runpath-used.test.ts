// The runpath an edit adds is the one the loader searches: with libgreet.so.1 moved out of the
// fixture's lib/ into a directory named only by `add-runpath`, the program (PIE and non-PIE) and a
// library loaded by a program (libuser, through the dlopen probe) still find it — no LD_LIBRARY_PATH —
// and LD_DEBUG=libs shows the loader searching that directory because of the edited file. x86_64 runs
// natively, aarch64 (64 KiB and 4 KiB page layouts) under qemu-user. The edits go through the built
// binary (dist/cli/main.js), as a build script would run it.

import { mkdir, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GREETING, fixture, requireTool, runOn, type Fixture } from './helpers/fixtures.js';
import { copyFixture, describeExec, escapeRegExp, readBack } from './helpers/verify.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import type { ExecResult } from './helpers/exec.js';
import { byteStringToText } from '../src/elf/byte-string.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const VARIANTS = ['x86_64', 'aarch64-64k', 'aarch64-4k'] as const;
const PROGRAMS = ['pie-runpath', 'pie-rpath', 'pie-no-runpath', 'exec-runpath', 'exec-rpath', 'exec-no-runpath'] as const;
const LIBRARIES = ['libuser-runpath', 'libuser-rpath', 'libuser-no-runpath'] as const;

const work = useTempDir('runpath-used');
let cases = 0;

beforeAll(() => {
  requireTool('qemu-aarch64');
  assertCliBuilt();
});

afterAll(() => {
  console.log(`runpath used: ${cases} (fixture, edit) cases proven with output and LD_DEBUG=libs`);
});

/**
 * A private copy of the fixture whose libgreet.so.1 lives only in a directory of its own, outside
 * every path the loader would search on its own.
 */
async function isolate(f: Fixture): Promise<{ file: string; only: string; root: string }> {
  const dir = join(work(), `${f.id.replaceAll('/', '_')}`);
  const copy = await copyFixture(f, dir);
  const only = join(dir, 'found-only-through-the-new-runpath');
  await mkdir(only);
  await rename(join(copy.libDir, 'libgreet.so.1'), join(only, 'libgreet.so.1'));
  return { file: copy.file, only, root: copy.root };
}

/** Runs the program, or the dlopen probe on the library, with only the given guest variables. */
function exercise(f: Fixture, file: string, vars: Record<string, string> = {}): Promise<ExecResult> {
  if (f.kind === 'shared') {
    const probe = fixture(`compiled/${f.id.split('/')[1] ?? ''}/dlopen-probe`);
    return runOn(f.arch, probe.path, [file], vars);
  }
  return runOn(f.arch, file, [], vars);
}

const expectedOutput = (f: Fixture): string => (f.kind === 'shared' ? 'dlopen-probe: 1 loaded' : GREETING);

async function tagsOf(file: string): Promise<{ runpath: string | null; rpath: string | null }> {
  const { summary } = await readBack(file);
  return {
    runpath: summary.runpath === null ? null : byteStringToText(summary.runpath),
    rpath: summary.rpath === null ? null : byteStringToText(summary.rpath),
  };
}

async function proveUsed(f: Fixture): Promise<void> {
  const { file, only } = await isolate(f);
  const before = await tagsOf(file);

  // Without the edit the dependency is not found: the directory is not searched by accident.
  const control = await exercise(f, file);
  expect(control.code, describeExec('before the edit, libgreet.so.1 must not be found', control)).not.toBe(0);
  expect(`${control.stdout}${control.stderr}`).toMatch(/libgreet\.so\.1: cannot open shared object file/);

  const edit = await runCli(['add-runpath', only, file], { timeoutMs: 120_000 });
  expect(edit.code, `${edit.stdout}${edit.stderr}`).toBe(0);
  const after = await tagsOf(file);
  // add-runpath keeps the kind of tag the file has; a file with neither gets DT_RUNPATH.
  const kind = before.rpath !== null && before.runpath === null ? 'RPATH' : 'RUNPATH';
  const value = kind === 'RPATH' ? after.rpath : after.runpath;
  expect(value?.split(':')[0]).toBe(only);

  const run = await exercise(f, file);
  expect(run.code, describeExec('after add-runpath, without LD_LIBRARY_PATH', run)).toBe(0);
  expect(run.stdout.trim()).toBe(expectedOutput(f));

  const debug = await exercise(f, file, { LD_DEBUG: 'libs' });
  expect(debug.code, describeExec('LD_DEBUG=libs run', debug)).toBe(0);
  // glibc: "search path=DIR...\t\t(RUNPATH from file FILE)" then "trying file=DIR/libgreet.so.1".
  const searched = new RegExp(
    `search path=${escapeRegExp(only)}[^\\n]*\\(${kind} from file [^)]*${escapeRegExp(file.split('/').at(-1) ?? '')}\\)`,
  );
  expect(debug.stderr, 'the loader searched the added directory because of the edited file').toMatch(searched);
  expect(debug.stderr).toMatch(new RegExp(`trying file=${escapeRegExp(join(only, 'libgreet.so.1'))}`));
  expect(debug.stderr).not.toMatch(/LD_LIBRARY_PATH/);
  cases++;
}

for (const variant of VARIANTS) {
  describe.concurrent(`${variant}: a dependency found only through the added runpath`, () => {
    for (const name of PROGRAMS) {
      it(`program ${name}`, () => proveUsed(fixture(`compiled/${variant}/${name}`)));
    }
    for (const name of LIBRARIES) {
      it(`library ${name}, loaded by a program`, () => proveUsed(fixture(`compiled/${variant}/${name}`)));
    }
  });
}
