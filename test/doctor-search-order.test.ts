// The loader's search order, case by case, on programs built for the purpose and checked against the
// real ld.so (x86_64, natively): RPATH inherited through the objects that loaded a library, RUNPATH not
// inherited, $ORIGIN through symbolic links, LD_LIBRARY_PATH set and unset, a cache entry a runpath
// overrides, a library of another machine in an earlier directory, glibc-hwcaps and legacy hwcaps
// subdirectories, DF_1_NODEFLIB, one file under two names, a non-ELF file where a library is looked
// for, a DT_NEEDED naming $ORIGIN, and the text report's order of the libraries not found.

import { copyFile, mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { FileReport } from '../src/doctor/doctor-report.js';
import { fixture, requireTool } from './helpers/fixtures.js';
import { traceLoader, type LoaderTrace } from './helpers/doctor-ld-debug.js';
import { doctorJson, reportedLoads, type DoctorJson } from './helpers/doctor-run.js';
import { buildLibrary, buildProgram } from './helpers/doctor-trees.js';
import { execTool, mustExec } from './helpers/exec.js';
import { inMountNamespace } from './helpers/mount-namespace.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const t = useTempDir('doctor-order');
const at = (...parts: string[]): string => join(t(), ...parts);

/** The names the loader in trace mode (ldd) reports as not found. */
function notFound(trace: LoaderTrace): string[] {
  return [...trace.stdout.matchAll(/^\s*(\S+) => not found$/gm)].map((m) => m[1] as string).sort();
}

function missing(report: FileReport): string[] {
  return [...new Set(report.needed.filter((n) => n.status === 'missing').map((n) => n.name))].sort();
}

/** doctor's report of one file, and the real loader's trace of the same file. */
async function both(
  path: string,
  mode: 'run' | 'list',
  options: { llp?: string; cwd?: string; shown?: string } = {},
): Promise<{ report: FileReport; trace: LoaderTrace }> {
  const args = [...(options.llp === undefined ? [] : ['--ld-library-path', options.llp]), path];
  const { json } = await doctorJson(args, options.cwd === undefined ? {} : { cwd: options.cwd });
  expect(json.errors).toEqual([]);
  const report = json.files[0];
  if (report === undefined) throw new Error(`no report for ${path}`);
  const trace = await traceLoader({
    arch: 'x86_64',
    mode,
    path: options.shown ?? path,
    libraryPath: options.llp ?? null,
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
  });
  return { report, trace };
}

function expectSameLoads(report: FileReport, trace: LoaderTrace): void {
  expect(reportedLoads(report)).toEqual(trace.loads.map(({ name, path }) => ({ name, path })));
}

/**
 * DIR/bin/prog, which needs DIR/b/libmiddleN.so (no runpath of its own), which needs DIR/a/libdeepN.so; the
 * program's DT_RPATH or DT_RUNPATH (`tag`) lists a/ and then b/.
 */
async function programOverTwoLibraries(dir: string, n: string, tag: 'rpath' | 'runpath'): Promise<string> {
  const deep = await buildLibrary(at(dir, 'a', `libdeep${n}.so`));
  const middle = await buildLibrary(at(dir, 'b', `libmiddle${n}.so`), `libmiddle${n}.so`, { needs: [deep] });
  return buildProgram(at(dir, 'bin/prog'), { needs: [middle], [tag]: `${at(dir, 'a')}:${at(dir, 'b')}` });
}

beforeAll(assertCliBuilt);

describe('DT_RPATH', () => {
  it('is inherited: a library without a runpath finds its dependency through the program’s DT_RPATH', async () => {
    const prog = await programOverTwoLibraries('inherit', '', 'rpath');
    const { report, trace } = await both(prog, 'run');
    expectSameLoads(report, trace);
    expect(report.loads.find((l) => l.name === 'libdeep.so')).toMatchObject({
      rule: 'rpath',
      owner: prog,
      neededBy: at('inherit/b/libmiddle.so'),
    });
  });

  it('is inherited past an object with DT_RUNPATH, which itself gets no inherited DT_RPATH', async () => {
    const deep = await buildLibrary(at('past/a/libdeep2.so'));
    const inner = await buildLibrary(at('past/c/libinner.so'), 'libinner.so', { needs: [deep] });
    const withRunpath = await buildLibrary(at('past/b/librun.so'), 'librun.so', { needs: [inner], runpath: at('past/c') });
    const prog = await buildProgram(at('past/bin/prog'), { needs: [withRunpath], rpath: `${at('past/a')}:${at('past/b')}` });
    const { report, trace } = await both(prog, 'run');
    expectSameLoads(report, trace);
    expect(report.loads.find((l) => l.name === 'libdeep2.so')).toMatchObject({ rule: 'rpath', owner: prog });
  });
});

describe('DT_RUNPATH', () => {
  it('is not inherited: a library without a runpath does not find what only the program’s DT_RUNPATH lists', async () => {
    const prog = await programOverTwoLibraries('norun', '3', 'runpath');
    const { report, trace } = await both(prog, 'list');
    expectSameLoads(report, trace);
    expect(missing(report)).toEqual(notFound(trace));
    expect(missing(report)).toEqual(['libdeep3.so']);
    expect(report.findings.map((f) => f.code)).toContain('library-missing');
    // Where the loader looked: libmiddle3.so has no runpath of its own, and the program's is not inherited.
    expect(report.needed.find((n) => n.name === 'libdeep3.so')?.searched.map((list) => list.rule)).toEqual(['cache', 'default']);
  });
});

describe('--problems', () => {
  it('prints only the files with findings: the name not found, where the loader looked, and the loads that lead there', async () => {
    const deep = await buildLibrary(at('problems/deps/libdeep4.so'));
    const middle = await buildLibrary(at('problems/lib/libmiddle4.so'), 'libmiddle4.so', { needs: [deep] });
    const found = await buildLibrary(at('problems/lib/libfound4.so'));
    const broken = await buildProgram(at('problems/bin/broken'), {
      needs: [middle, found],
      runpath: `${at('problems/lib')}:${at('problems/deps')}`,
    });
    await buildProgram(at('problems/bin/fine'));
    const result = await runCli(['doctor', '--problems', at('problems/bin')]);
    expect(result.code).toBe(1);
    const lines = result.stdout.split('\n');
    expect(lines[2]).toMatch(new RegExp(`^${broken}: program, x86_64, loader /lib64/ld-linux-x86-64.so.2 \\(glibc \\d+\\.\\d+\\)$`));
    expect(lines.slice(3)).toEqual([
      `  libmiddle4.so => ${middle}  [RUNPATH of broken]`,
      '    libdeep4.so => not found (needed by libmiddle4.so)',
      '      searched ld.so.cache, then the default directories',
      `  error (library-missing): libdeep4.so (needed by ${middle}) is not found: the program does not start`,
      `    fix: add the directory that holds libdeep4.so to the runpath of ${middle}`,
      '',
      `${at('problems/bin')}: 2 dynamic ELF files, 1 with problems (1 error, 0 warnings); 2 other files skipped`,
      '',
    ]);
    // The loader agrees: that one name, and only it, is not found.
    expect(notFound(await traceLoader({ arch: 'x86_64', mode: 'list', path: broken }))).toEqual(['libdeep4.so']);
    // The full report of the same tree has both files and every load.
    const full = await runCli(['doctor', at('problems/bin')]);
    expect(full.stdout).toContain(`${at('problems/bin/fine')}: program`);
    expect(full.stdout).toContain(`  libfound4.so => ${found}  [RUNPATH of broken]`);
  });
});

describe('the text report', () => {
  it('lists each DT_NEEDED where the loader asks for it: one not found stands between those found, as ldd lists them', async () => {
    const lib = (name: string, options = {}): Promise<string> => buildLibrary(at('order/lib', name), name, options);
    const [first, gone, deepGone, last] = await Promise.all([
      lib('libfirst.so'),
      lib('libgone.so'),
      lib('libdeepgone.so'),
      lib('liblast.so'),
    ]);
    const middle = await lib('libmiddle.so', { needs: [deepGone] });
    const prog = await buildProgram(at('order/bin/prog'), { needs: [first, gone, middle, last], runpath: at('order/lib') });
    await rm(gone);
    await rm(deepGone);
    const text = await runCli(['doctor', prog]);
    expect(text.code).toBe(1);
    const trace = await traceLoader({ arch: 'x86_64', mode: 'list', path: prog });
    // ldd's lines: "\tname => path (address)", "\tname => not found"; the vDSO and the loader by path alone.
    const lddNames = [...trace.stdout.matchAll(/^\t(\S+) => /gm)].map((m) => m[1] as string);
    const doctorNames = [...text.stdout.matchAll(/^ {2,}(\S+) => /gm)]
      .map((m) => m[1] as string)
      .filter((name) => !name.startsWith('ld-linux'));
    expect(lddNames).toEqual(['libfirst.so', 'libgone.so', 'libmiddle.so', 'liblast.so', 'libc.so.6', 'libdeepgone.so']);
    expect(doctorNames).toEqual(lddNames);
    // Under the object that needs it.
    expect(text.stdout).toContain('\n    libdeepgone.so => not found (needed by libmiddle.so)\n');
  });
});

describe('$ORIGIN', () => {
  it('of a program is the directory of its real path (the kernel’s /proc/self/exe), also when started through a link', async () => {
    const lib = await buildLibrary(at('origin/store/pkg/lib/liborigin.so'));
    const prog = await buildProgram(at('origin/store/pkg/bin/prog'), { needs: [lib], runpath: '$ORIGIN/../lib' });
    await mkdir(at('origin/app/bin'), { recursive: true });
    await symlink(prog, at('origin/app/bin/prog'));
    const { report, trace } = await both(at('origin/app/bin/prog'), 'run');
    expectSameLoads(report, trace);
    // Not normalized: the loader prints (and opens) $ORIGIN/../lib as it builds it.
    expect(report.loads[0]?.path).toBe(`${at('origin/store/pkg/bin')}/../lib/liborigin.so`);
  });

  it('of a library is the directory it was opened from, links not resolved, and the kernel then walks that path', async () => {
    const deep = await buildLibrary(at('olink/store/pkg/deps/libodeep.so'));
    // A decoy where a lexical reading of …/bin/../lib/../deps would look: another machine's, so a
    // search that went there would pass it over and find nothing.
    await buildLibrary(at('olink/app/deps/libodeep.so'), 'libodeep.so', { arch: 'aarch64' });
    const lib = await buildLibrary(at('olink/store/pkg/lib/libolink.so'), 'libolink.so', { needs: [deep], runpath: '$ORIGIN/../deps' });
    await symlink(at('olink/store/pkg/lib'), at('olink/app/lib'));
    const prog = await buildProgram(at('olink/app/bin/prog'), { needs: [lib], runpath: '$ORIGIN/../lib' });
    const { report, trace } = await both(prog, 'run');
    expectSameLoads(report, trace);
    // The kernel walks …/app/bin/../lib (a link to store/pkg/lib)/../deps to store/pkg/deps, not to the decoy app/deps.
    expect(report.loads.find((l) => l.name === 'libodeep.so')?.path).toBe(`${at('olink/app/bin')}/../lib/../deps/libodeep.so`);
  });

  it('in a DT_NEEDED is substituted and the path opened as named', async () => {
    const lib = await buildLibrary(at('oneeded/x/libo.so'));
    const prog = await buildProgram(at('oneeded/bin/prog'));
    await mustExec(requireTool('patchelf'), ['--add-needed', '$ORIGIN/../x/libo.so', prog]);
    const { report, trace } = await both(prog, 'run');
    expectSameLoads(report, trace);
    expect(report.loads[0]).toMatchObject({ path: `${at('oneeded/bin')}/../x/libo.so`, rule: 'path' });
    expect(lib).toBe(at('oneeded/x/libo.so'));
  });
});

describe('LD_LIBRARY_PATH', () => {
  beforeAll(async () => {
    await buildLibrary(at('llp/r/libl.so'));
    await buildLibrary(at('llp/l/libl.so'));
    await buildLibrary(at('llp/cwd/libl.so'));
    await buildProgram(at('llp/bin/prog-runpath'), { needs: [at('llp/r/libl.so')], runpath: at('llp/r') });
    await buildProgram(at('llp/bin/prog-rpath'), { needs: [at('llp/r/libl.so')], rpath: at('llp/r') });
  }, 60_000);

  it('unset: the runpath finds the library', async () => {
    const { report, trace } = await both(at('llp/bin/prog-runpath'), 'run');
    expectSameLoads(report, trace);
    expect(report.loads[0]?.rule).toBe('runpath');
  });

  it('set: it comes before DT_RUNPATH, after DT_RPATH', async () => {
    const runpath = await both(at('llp/bin/prog-runpath'), 'run', { llp: at('llp/l') });
    expectSameLoads(runpath.report, runpath.trace);
    expect(runpath.report.loads[0]).toMatchObject({ rule: 'ld-library-path', path: at('llp/l/libl.so') });
    const rpath = await both(at('llp/bin/prog-rpath'), 'run', { llp: at('llp/l') });
    expectSameLoads(rpath.report, rpath.trace);
    expect(rpath.report.loads[0]?.rule).toBe('rpath');
  });

  it('with an empty entry (the working directory) and $ORIGIN', async () => {
    const { report, trace } = await both(at('llp/bin/prog-runpath'), 'run', { llp: `${at('llp/none')}::$ORIGIN/../l`, cwd: at('llp/cwd') });
    expectSameLoads(report, trace);
    expect(report.loads[0]?.path).toBe('libl.so');
  });
});

describe('ld.so.cache and the default directories', () => {
  it('a runpath entry that has the library wins over the cache entry; without one the cache answers', async () => {
    const zlib = fixture('debian/x86_64/zlib1g/libz.so.1.2.13').path;
    await mkdir(at('cache/r'), { recursive: true });
    await copyFile(zlib, at('cache/r/libz.so.1'));
    const withRunpath = await buildProgram(at('cache/bin/prog-runpath'), { needs: [at('cache/r/libz.so.1')], runpath: at('cache/r') });
    const plain = await buildProgram(at('cache/bin/prog'), { needs: [at('cache/r/libz.so.1')] });
    const overridden = await both(withRunpath, 'run');
    expectSameLoads(overridden.report, overridden.trace);
    expect(overridden.report.loads[0]).toMatchObject({ name: 'libz.so.1', rule: 'runpath' });
    const cached = await both(plain, 'run');
    expectSameLoads(cached.report, cached.trace);
    expect(['cache', 'default']).toContain(cached.report.loads[0]?.rule);
  });

  it('DF_1_NODEFLIB: neither the cache nor the default directories for the object’s own dependencies', async () => {
    const lib = await buildLibrary(at('nodeflib/r/libn.so'));
    const prog = await buildProgram(at('nodeflib/bin/prog'), { needs: [lib], runpath: at('nodeflib/r'), extra: ['-Wl,-z,nodefaultlib'] });
    const { report, trace } = await both(prog, 'list');
    expectSameLoads(report, trace);
    expect(missing(report)).toEqual(notFound(trace));
    expect(missing(report)).toContain('libc.so.6');
  });
});

describe('what the search passes over', () => {
  it('a library of another machine in an earlier directory is skipped in silence', async () => {
    await buildLibrary(at('machine/arm/libw.so'), 'libw.so', { arch: 'aarch64' });
    const lib = await buildLibrary(at('machine/x86/libw.so'));
    const prog = await buildProgram(at('machine/bin/prog'), { needs: [lib], runpath: `${at('machine/arm')}:${at('machine/x86')}` });
    const { report, trace } = await both(prog, 'run');
    expectSameLoads(report, trace);
    expect(report.loads[0]?.path).toBe(at('machine/x86/libw.so'));
    expect(report.needed[0]?.passedOver).toEqual([{ path: at('machine/arm/libw.so'), reason: 'EM_AARCH64, not x86_64' }]);
  });

  it('a symbolic link loop where a library is looked for ends that list: the loader goes on with the next rule', async () => {
    const lib = await buildLibrary(at('loop/b/libloop.so'));
    await mkdir(at('loop/a'), { recursive: true });
    await symlink(at('loop/a/libloop.so'), at('loop/a/libloop.so'));
    const prog = await buildProgram(at('loop/bin/prog'), { needs: [lib], runpath: `${at('loop/a')}:${at('loop/b')}` });
    const { report, trace } = await both(prog, 'list');
    expectSameLoads(report, trace);
    expect(missing(report)).toEqual(notFound(trace));
    expect(missing(report)).toEqual(['libloop.so']);
  });

  it('one file under two names is loaded once (same device and inode)', async () => {
    const real = await buildLibrary(at('twonames/s/libfoo.so.1'));
    const alias = await buildLibrary(at('twonames/build/libfoo-alias.so'));
    const a = await buildLibrary(at('twonames/s/liba.so'), 'liba.so', { needs: [real], runpath: '$ORIGIN' });
    const b = await buildLibrary(at('twonames/s/libb.so'), 'libb.so', { needs: [alias], runpath: '$ORIGIN' });
    await symlink('libfoo.so.1', at('twonames/s/libfoo-alias.so'));
    const prog = await buildProgram(at('twonames/bin/prog'), { needs: [a, b], runpath: at('twonames/s') });
    const { report, trace } = await both(prog, 'run');
    expectSameLoads(report, trace);
    expect(report.needed.find((n) => n.name === 'libfoo-alias.so')?.status).toBe('same-file');
  });

  it('a file that is not ELF where a library is looked for stops the load', async () => {
    const good = await buildLibrary(at('notelf/good/libq.so'));
    await mkdir(at('notelf/bad'), { recursive: true });
    // A linker script, as libc.so is: longer than an ELF header, so the loader reads it and finds no magic.
    await writeFile(at('notelf/bad/libq.so'), `/* GNU ld script: use the shared library, not this file. */\nINPUT(-lq)\n`);
    const prog = await buildProgram(at('notelf/bin/prog'), { needs: [good], runpath: `${at('notelf/bad')}:${at('notelf/good')}` });
    const { report, trace } = await both(prog, 'run');
    expectSameLoads(report, trace);
    expect(trace.code).not.toBe(0);
    expect(trace.stderr).toContain(`${at('notelf/bad/libq.so')}: invalid ELF header`);
    expect(report.needed[0]).toMatchObject({ status: 'fatal', path: at('notelf/bad/libq.so'), message: 'invalid ELF header' });
    expect(report.findings.map((f) => f.code)).toContain('load-error');
  });
});

describe('hwcaps subdirectories', () => {
  it('glibc-hwcaps/x86-64-vN, then the legacy tls/ and x86_64/ subdirectories, then the directory', async () => {
    for (const sub of ['glibc-hwcaps/x86-64-v2', 'glibc-hwcaps/x86-64-v3', 'glibc-hwcaps/x86-64-v4', 'tls', 'x86_64', ''])
      await buildLibrary(at('hwcaps/all', sub, 'libh.so'));
    for (const sub of ['tls', '']) await buildLibrary(at('hwcaps/legacy', sub, 'libh.so'));
    for (const dir of ['all', 'legacy']) {
      const prog = await buildProgram(at(`hwcaps/bin/prog-${dir}`), { needs: [at('hwcaps', dir, 'libh.so')], runpath: at('hwcaps', dir) });
      const { report, trace } = await both(prog, 'run');
      expectSameLoads(report, trace);
      // Every x86-64 CPU of the last fifteen years has x86-64-v2.
      if (dir === 'all') expect(report.loads[0]?.directory).toMatch(/\/glibc-hwcaps\/x86-64-v[234]\/$/);
    }
  });

  it('are the loader’s, not /proc/cpuinfo’s: a /proc/cpuinfo that lists fewer flags than the CPU has (as in some virtual machines) changes nothing', async () => {
    for (const sub of ['glibc-hwcaps/x86-64-v2', 'glibc-hwcaps/x86-64-v3', 'glibc-hwcaps/x86-64-v4', 'tls', 'x86_64', ''])
      await buildLibrary(at('hwcaps/vm', sub, 'libh.so'));
    const prog = await buildProgram(at('hwcaps/bin/prog-vm'), { needs: [at('hwcaps/vm/libh.so')], runpath: at('hwcaps/vm') });
    // The flags of a CPU below x86-64-v2, in a mount namespace of doctor's own: the loader asks the CPU.
    const cpuinfo = at('hwcaps/cpuinfo');
    await writeFile(
      cpuinfo,
      (await readFile('/proc/cpuinfo', 'latin1')).replace(/^(flags\s*:).*$/gm, '$1 fpu tsc cx8 cmov mmx fxsr sse sse2 syscall lm'),
      'latin1',
    );
    const inNamespace = inMountNamespace(['mount --bind "$0" /proc/cpuinfo'], cpuinfo);
    const seen = await execTool(inNamespace[0] as string, [...inNamespace.slice(1), requireTool('grep'), '-m1', '^flags', '/proc/cpuinfo']);
    expect(seen.stdout, seen.stderr).toMatch(/^flags\s*: fpu tsc cx8 cmov mmx fxsr sse sse2 syscall lm$/m);
    const result = await runCli(['doctor', '--json', prog], { wrapper: inNamespace });
    const report = (JSON.parse(result.stdout) as DoctorJson).files[0];
    if (report === undefined) throw new Error(`no report:\n${result.stderr}`);
    const trace = await traceLoader({ arch: 'x86_64', mode: 'run', path: prog });
    expect(trace.loads[0]?.path).toMatch(/\/glibc-hwcaps\/x86-64-v[234]\/libh\.so$/);
    expectSameLoads(report, trace);
    expect(report.loader.cpu).toBe('this machine');
  });
});
