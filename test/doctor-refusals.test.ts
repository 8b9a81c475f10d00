// What makes the loader give up on an object it found, and which of a repeated dynamic entry it
// reads, each case against the real ld.so (x86_64, natively): a program (position-independent or
// not) where a library is looked for, a program that needs itself, links to /dev/null and /dev/zero, a
// library cut off before its program headers, a library whose PT_DYNAMIC is zero-sized, an empty
// DT_NEEDED, and two DT_RUNPATH or DT_SONAME entries (the loader keeps the last).

import { mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { FileReport } from '../src/doctor/doctor-report.js';
import { requireTool } from './helpers/fixtures.js';
import { traceLoader, type LoaderTrace } from './helpers/doctor-ld-debug.js';
import { doctorJson, reportedLoads } from './helpers/doctor-run.js';
import { buildLibrary, buildProgram } from './helpers/doctor-trees.js';
import { mustExec } from './helpers/exec.js';
import { fieldOffsets, rawLayout, writeUnsigned } from './helpers/malformed.js';
import { retagNeeded } from './helpers/retag-needed.js';
import { assertCliBuilt } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';
import { DT, PT } from '../src/elf/constants.js';

const t = useTempDir('doctor-refusals');
let patchelf: string;
const at = (...parts: string[]): string => join(t(), ...parts);

async function both(path: string, mode: 'run' | 'list'): Promise<{ report: FileReport; trace: LoaderTrace }> {
  const { json } = await doctorJson([path]);
  expect(json.errors).toEqual([]);
  const report = json.files[0];
  if (report === undefined) throw new Error(`no report for ${path}`);
  return { report, trace: await traceLoader({ arch: 'x86_64', mode, path }) };
}

/**
 * The loader stopped at `path` with `message`, and doctor says so, with a load-error finding. The
 * loader's line names the file by its path when the first look at it fails (open_verify), by the
 * name it was asked for when mapping it does (`named`).
 */
function expectFatal(report: FileReport, trace: LoaderTrace, path: string, message: string, named = path): void {
  expect(trace.code).not.toBe(0);
  expect(trace.stderr).toContain(`${named}: ${message}`);
  expect(report.needed.find((n) => n.status === 'fatal')).toMatchObject({ path, message });
  expect(report.findings.map((f) => f.code)).toContain('load-error');
}

/** Sets PT_DYNAMIC's p_filesz and p_memsz to 0: the section headers still name .dynamic, so it is no debug-info file. */
async function zeroDynamicSegment(file: string): Promise<void> {
  const bytes = new Uint8Array(await readFile(file));
  const layout = rawLayout(bytes);
  const dynamic = layout.programHeaders.find((ph) => ph.type === PT.PT_DYNAMIC);
  if (dynamic === undefined) throw new Error(`${file}: no PT_DYNAMIC`);
  const { p_filesz, word } = fieldOffsets(layout.elfClass);
  // p_memsz follows p_filesz in both classes.
  for (const field of [p_filesz, p_filesz + word]) writeUnsigned(bytes, dynamic.at + field, word as 4 | 8, layout.little, 0);
  await writeFile(file, bytes);
}

beforeAll(() => {
  assertCliBuilt();
  patchelf = requireTool('patchelf');
});

describe('an object the loader finds but will not map', () => {
  it.each([
    ['a position-independent executable', ['-pie'], 'cannot dynamically load position-independent executable'],
    ['an executable (ET_EXEC)', ['-no-pie'], 'cannot dynamically load executable'],
  ])('%s where a library is looked for stops the load', async (name, flags, message) => {
    const dir = name.replace(/\W+/g, '-');
    const decoy = await buildProgram(at(dir, 'lib/libprog.so'), { extra: flags });
    const prog = await buildProgram(at(dir, 'bin/prog'), { runpath: at(dir, 'lib') });
    await mustExec(patchelf, ['--add-needed', 'libprog.so', prog]);
    const { report, trace } = await both(prog, 'run');
    expectFatal(report, trace, decoy, message, 'libprog.so');
  });

  it('a program that needs itself by its path: the kernel mapped it under no name, so the loader opens it again', async () => {
    const prog = await buildProgram(at('self/prog'));
    await mustExec(patchelf, ['--add-needed', prog, prog]);
    const { report, trace } = await both(prog, 'run');
    expectFatal(report, trace, prog, 'cannot dynamically load position-independent executable');
  });

  it.each([
    ['/dev/null', 'file too short'],
    ['/dev/zero', 'invalid ELF header'],
  ])('a link to %s in an earlier directory: the loader reads it and stops', async (device, message) => {
    const dir = `device-${device.slice(5)}`;
    const good = await buildLibrary(at(dir, 'good/libdev.so'));
    await mkdir(at(dir, 'bad'), { recursive: true });
    await symlink(device, at(dir, 'bad/libdev.so'));
    const prog = await buildProgram(at(dir, 'bin/prog'), { needs: [good], runpath: `${at(dir, 'bad')}:${at(dir, 'good')}` });
    const { report, trace } = await both(prog, 'run');
    expectFatal(report, trace, at(dir, 'bad/libdev.so'), message);
  });

  it('a library with a zero-sized PT_DYNAMIC (not a debug-info file): the loader finds no dynamic section and stops', async () => {
    const lib = await buildLibrary(at('nodynamic/lib/libnodyn.so'));
    const prog = await buildProgram(at('nodynamic/bin/prog'), { needs: [lib], runpath: at('nodynamic/lib') });
    await zeroDynamicSegment(lib);
    const { report, trace } = await both(prog, 'run');
    expectFatal(report, trace, lib, 'object file has no dynamic section', 'libnodyn.so');
    // In a tree, the library itself is read as the loader reads it too: nothing doctor cannot read.
    const tree = await doctorJson([at('nodynamic')]);
    expect(tree.json.errors).toEqual([]);
    expect(tree.cli.code).toBe(1);
  });

  it('a library that ends before its program headers stops the load', async () => {
    const good = await buildLibrary(at('short/good/libshort.so'));
    await mkdir(at('short/bad'), { recursive: true });
    await writeFile(at('short/bad/libshort.so'), (await readFile(good)).subarray(0, 200));
    const prog = await buildProgram(at('short/bin/prog'), { needs: [good], runpath: `${at('short/bad')}:${at('short/good')}` });
    const { report, trace } = await both(prog, 'run');
    expectFatal(report, trace, at('short/bad/libshort.so'), 'cannot read file data');
  });
});

describe('entries no linker writes', () => {
  it('an empty DT_NEEDED names the program (its name is ""): the load goes on', async () => {
    const lib = await buildLibrary(at('empty/lib/libempty.so'));
    const prog = await buildProgram(at('empty/bin/prog'), { needs: [lib], runpath: at('empty/lib') });
    await mustExec(patchelf, ['--add-needed', 'libmark.so', prog]);
    await retagNeeded(prog, 'libmark.so', { toEmpty: true });
    const { report, trace } = await both(prog, 'run');
    expect(trace.code, trace.stderr).toBe(0);
    expect(reportedLoads(report)).toEqual(trace.loads.map(({ name, path }) => ({ name, path })));
    expect(report.findings).toEqual([]);
  });

  it('two DT_RUNPATH entries: the loader searches the last', async () => {
    await buildLibrary(at('tworun/a/libtwo.so'));
    const inB = await buildLibrary(at('tworun/b/libtwo.so'));
    const prog = await buildProgram(at('tworun/bin/prog'), { needs: [inB] });
    // --add-needed puts each name first: the entries end as a, b, then the program's own.
    for (const dir of ['b', 'a']) await mustExec(patchelf, ['--add-needed', at('tworun', dir), prog]);
    for (const dir of ['a', 'b']) await retagNeeded(prog, at('tworun', dir), { tag: DT.DT_RUNPATH });
    const { report, trace } = await both(prog, 'run');
    expect(trace.code, trace.stderr).toBe(0);
    expect(reportedLoads(report)).toEqual(trace.loads.map(({ name, path }) => ({ name, path })));
    expect(report.loads.find((l) => l.name === 'libtwo.so')?.path).toBe(at('tworun/b/libtwo.so'));
  });

  it('two DT_SONAME entries: a later DT_NEEDED finds the loaded library by the last', async () => {
    const lib = await buildLibrary(at('twoname/lib/libfirst.so'), 'libreal.so');
    await mustExec(patchelf, ['--add-needed', 'libfake.so', lib]);
    await retagNeeded(lib, 'libfake.so', { tag: DT.DT_SONAME });
    const prog = await buildProgram(at('twoname/bin/prog'), { runpath: at('twoname/lib') });
    for (const name of ['libreal.so', 'libfirst.so']) await mustExec(patchelf, ['--add-needed', name, prog]);
    const { report, trace } = await both(prog, 'list');
    expect(trace.stdout).not.toContain('not found');
    expect(reportedLoads(report)).toEqual(trace.loads.map(({ name, path }) => ({ name, path })));
    expect(report.needed.find((n) => n.name === 'libreal.so')?.status).toBe('already-loaded');
    expect(report.findings).toEqual([]);
  });
});
