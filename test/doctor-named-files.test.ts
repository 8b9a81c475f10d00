// Files named on the command line that are not dynamic ELF files: a shell wrapper as Nixpkgs'
// makeWrapper writes it is followed to the program it runs, with the LD_LIBRARY_PATH it exports, and
// that program is compared with what the real loader loads when the wrapper runs (bash, then the
// loader of the program it execs); the LD_LIBRARY_PATH doctor reads out of each makeWrapper form is
// the one bash gives the program. A script, a static program, an archive, a text file and an empty
// file named directly are findings; in a tree they are only counted.

import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { fixture, requireTool } from './helpers/fixtures.js';
import { parseLdDebug } from './helpers/doctor-ld-debug.js';
import { doctorJson, reportedLoads } from './helpers/doctor-run.js';
import { buildLibrary, buildProgram } from './helpers/doctor-trees.js';
import { makeShellWrapper, type WrapperFlag } from './helpers/shell-wrapper.js';
import { cleanEnv, execTool, mustExec } from './helpers/exec.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const t = useTempDir('doctor-named');
const at = (...parts: string[]): string => join(t(), ...parts);

/**
 * The loads of the program at the end of a chain of wrappers, from LD_DEBUG of the whole run: each
 * bash, then the program, says "transferring control" once its loads are done, so the program's are
 * those between the last two.
 */
async function wrapperTrace(wrapper: string, cwd: string): Promise<{ name: string; path: string }[]> {
  const run = await execTool(wrapper, [], { env: cleanEnv({ LD_DEBUG: 'libs:files' }), cwd });
  expect(run.code, run.stderr).toBe(0);
  const lines = run.stderr.split('\n');
  const transfers = lines.flatMap((line, i) => (/transferring control: /.test(line) ? [i] : []));
  expect(transfers.length).toBeGreaterThan(1);
  return parseLdDebug(lines.slice(transfers.at(-2), transfers.at(-1)).join('\n'), false).map(({ name, path }) => ({ name, path }));
}

beforeAll(assertCliBuilt);

describe('a shell wrapper named on the command line', () => {
  it('is followed to the program it runs (wrapProgram twice), which is diagnosed with the LD_LIBRARY_PATH the wrappers export, as the loader loads it', async () => {
    // A Nix output: bin/prog wraps bin/.prog-wrapped_ (a wrapper too), which wraps bin/.prog-wrapped;
    // libfirst.so and libsecond.so are found only through the wrappers' LD_LIBRARY_PATH.
    const out = at('store/out');
    const first = await buildLibrary(join(out, 'first/libfirst.so'));
    const second = await buildLibrary(join(out, 'second/libsecond.so'));
    const program = await buildProgram(join(out, 'bin/.prog-wrapped'), { needs: [first, second] });
    const inner = await makeShellWrapper(join(out, 'bin/.prog-wrapped_'), program, [{ prefix: join(out, 'second') }]);
    await makeShellWrapper(join(out, 'bin/prog'), inner, [{ prefix: join(out, 'first') }, { suffix: join(out, 'nowhere') }]);
    await symlink(out, at('result'));
    const { json, cli } = await doctorJson(['./result/bin/prog'], { cwd: t() });
    expect(cli.code, cli.stderr).toBe(0);
    expect(json.errors).toEqual([]);
    const report = json.files[0];
    if (report === undefined) throw new Error('the wrapped program was not diagnosed');
    expect(report.file).toBe(program);
    expect(reportedLoads(report)).toEqual(await wrapperTrace('./result/bin/prog', t()));
    expect(report.loads.slice(0, 2).map((load) => load.rule)).toEqual(['ld-library-path', 'ld-library-path']);
    const llp = `${join(out, 'second')}:${join(out, 'first')}:${join(out, 'nowhere')}`;
    expect(report.wrapper).toEqual({ file: at('result/bin/prog'), ldLibraryPath: llp });
    expect(json.notDynamic).toEqual([
      {
        file: at('result/bin/prog'),
        kind: 'script',
        description: `a shell wrapper (#! /bin/bash -e) that runs ${inner}, a wrapper that runs ${program}`,
        interpreter: '#! /bin/bash -e',
        runs: { file: program, path: program, ldLibraryPath: llp },
        findings: [],
      },
    ]);
    // The tree summary counts the wrapper as the other file it is.
    expect(json.summary).toEqual([{ path: './result/bin/prog', files: 1, skipped: 1, unreadable: 0, errors: 0, warnings: 0, problems: 0 }]);
    const text = await runCli(['doctor', './result/bin/prog'], { cwd: t() });
    expect(text.stdout).toContain(
      `\nresult/bin/prog: a shell wrapper (#! /bin/bash -e) that runs ${inner}, a wrapper that runs ${program}: that program is diagnosed with LD_LIBRARY_PATH=${llp}\n`,
    );
    expect(text.stdout).toContain(`(glibc ${report.loader.glibc ?? ''}); LD_LIBRARY_PATH=${llp} from the wrapper\n`);
  });

  it.each<[string, WrapperFlag[]]>([
    ['--prefix', [{ prefix: '/w/a' }, { prefix: '/w/b' }, { prefix: '/start' }]],
    ['--suffix', [{ suffix: '/w/a' }, { suffix: '/start' }, { suffix: '/w/a' }]],
    ['--set', [{ set: '/w/set' }]],
    ['--set-default', [{ setDefault: '/w/default' }]],
    ['--unset, then --prefix', ['unset', { prefix: '/w/a' }]],
    ['--unset', ['unset']],
    ['the older makeWrapper’s --prefix and --suffix', [{ oldPrefix: '/w/old' }, { oldSuffix: '/w/tail' }]],
  ])('%s: the LD_LIBRARY_PATH doctor reads out of the wrapper is the one bash gives the program', async (name, flags) => {
    const dir = at('forms', name.replace(/\W+/g, '-'));
    const printer = join(dir, 'print-llp');
    await mkdir(dir, { recursive: true });
    await writeFile(
      `${printer}.c`,
      '#include <stdio.h>\n#include <stdlib.h>\nint main(void) { const char *v = getenv("LD_LIBRARY_PATH"); if (v) printf("set:%s\\n", v); else puts("unset"); return 0; }\n',
    );
    await mustExec(requireTool('gcc'), ['-O1', '-o', printer, `${printer}.c`]);
    const wrapper = await makeShellWrapper(join(dir, 'wrapper'), printer, flags);
    for (const start of [undefined, '/start:/other']) {
      const run = await mustExec(wrapper, [], { env: cleanEnv(start === undefined ? {} : { LD_LIBRARY_PATH: start }) });
      const { json } = await doctorJson([...(start === undefined ? [] : ['--ld-library-path', start]), wrapper]);
      const got = json.files[0]?.wrapper?.ldLibraryPath;
      expect(got === null ? 'unset' : `set:${got ?? '(no report)'}`, `started with ${start ?? 'none'}`).toBe(run.stdout.trim());
    }
  });

  it('a line that changes LD_LIBRARY_PATH in a way doctor does not follow is a warning naming it', async () => {
    const program = await buildProgram(at('unfollowed/bin/.tool-wrapped'));
    const line = 'export LD_LIBRARY_PATH="$(cat /etc/extra-libs)"';
    const wrapper = await makeShellWrapper(at('unfollowed/bin/tool'), program, [{ prefix: '/w/a' }], [line]);
    const { json, cli } = await doctorJson([wrapper]);
    expect(cli.code).toBe(0);
    expect(json.notDynamic[0]?.findings).toEqual([
      {
        severity: 'warning',
        code: 'wrapper-environment',
        message: `${wrapper} changes LD_LIBRARY_PATH in a line doctor does not follow (${line}): ${program} is diagnosed without that change`,
        fix: 'check that line by hand, or name the program and give doctor the value it gets with --ld-library-path',
      },
    ]);
    expect(json.files[0]?.wrapper?.ldLibraryPath).toBe('/w/a');
  });

  it('a wrapper whose program is missing is an error', async () => {
    const wrapper = await makeShellWrapper(at('gone/bin/tool'), at('gone/bin/.tool-wrapped'), []);
    const { json, cli } = await doctorJson([wrapper]);
    expect(cli.code).toBe(1);
    expect(json.files).toEqual([]);
    expect(json.notDynamic[0]?.findings.map((f) => [f.code, f.message])).toEqual([
      [
        'not-dynamic-elf',
        `${wrapper} is a shell wrapper (#! /bin/bash -e) that runs ${at('gone/bin/.tool-wrapped')}, which does not exist here (ENOENT): doctor checks programs and libraries the loader loads`,
      ],
    ]);
  });
});

describe('other files named on the command line', () => {
  let files: Record<string, string>;

  beforeAll(async () => {
    const dir = at('others');
    await mkdir(dir, { recursive: true });
    const object = await buildLibrary(join(dir, 'libarchived.so'));
    await mustExec(requireTool('ar'), ['rcs', join(dir, 'libarchived.a'), object]);
    await writeFile(join(dir, 'tool.py'), '#!/usr/bin/env python3\nprint("hello")\n');
    await writeFile(join(dir, 'README'), 'text\n');
    await writeFile(join(dir, 'empty'), '');
    files = {
      script: join(dir, 'tool.py'),
      archive: join(dir, 'libarchived.a'),
      'not-elf': join(dir, 'README'),
      empty: join(dir, 'empty'),
      static: fixture('compiled/x86_64/static').path,
    };
  }, 60_000);

  it.each([
    ['script', 'a script (#!/usr/bin/env python3)'],
    ['static', 'a statically linked program: no loader loads it, and it has no runpath'],
    ['archive', 'an archive (a static library): it is linked, not loaded'],
    ['not-elf', 'not an ELF file'],
    ['empty', 'an empty file'],
  ])('%s: a finding that says what it is (exit 1); the summary still counts it as skipped', async (kind, description) => {
    const file = files[kind] as string;
    const { json, cli } = await doctorJson([file]);
    expect(cli.code).toBe(1);
    expect(json.notDynamic).toMatchObject([{ file, kind, description, runs: null }]);
    expect(json.notDynamic[0]?.findings.map((f) => [f.severity, f.code])).toEqual([['error', 'not-dynamic-elf']]);
    expect(json.notDynamic[0]?.findings[0]?.message).toContain(`${file} is ${description}`);
    expect(json.summary).toEqual([{ path: file, files: 0, skipped: 1, unreadable: 0, errors: 1, warnings: 0, problems: 1 }]);
    const text = await runCli(['doctor', file]);
    expect(text.stdout).toContain(`: ${description}\n  error (not-dynamic-elf): `);
  });

  it('in a tree they are counted, not findings (exit 0)', async () => {
    const { json, cli } = await doctorJson([at('others')]);
    expect(cli.code).toBe(0);
    expect(json.notDynamic).toEqual([]);
    expect(json.summary).toEqual([{ path: at('others'), files: 1, skipped: 5, unreadable: 0, errors: 0, warnings: 0, problems: 0 }]);
  });
});
