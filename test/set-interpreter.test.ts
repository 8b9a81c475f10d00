// set-interpreter on real programs, x86_64 natively and aarch64 under qemu-aarch64: a shorter path
// written in place, a longer one appended (PT_INTERP moved into the new segment), each program then
// run through a copy of the real loader at the new path, which /proc/self/maps shows it mapped. Proved
// with readelf, patchelf, eu-elflint; a library and a static program are refused and left alone; the
// patchelf-compatible mode answers as patchelf 0.18 does, line for line and exit code for exit code.

import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, realpath, rm, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUILD_ARCHES, type BuildArch } from './helpers/arch.js';
import { execTool, type ExecResult } from './helpers/exec.js';
import { REPO_ROOT, loaderOf, requireTool, runOn } from './helpers/fixtures.js';
import { LOADER_MAPS_SOURCE as MAPS_SOURCE } from './helpers/loader-maps.js';
import { readelfText } from './helpers/readelf.js';
import { assertCliBuilt, runCli, stderrLines } from './helpers/run-cli.js';
import { compile, describeRun } from './helpers/rw-build.js';
import { makeTempDir } from './helpers/temp-dir.js';

/** patchelf 0.18, whose --set-interpreter/--print-interpreter the compatible mode follows (the closure benchmark downloads it). */
const PATCHELF_018 = process.env.PATCHELF_0_18 ?? join(REPO_ROOT, 'bench', '.cache', 'closure', 'patchelf-0.18', 'bin', 'patchelf');

const DEFAULT_INTERPRETER: Record<BuildArch, string> = {
  x86_64: '/lib64/ld-linux-x86-64.so.2',
  aarch64: '/lib/ld-linux-aarch64.so.1',
};

interface Built {
  readonly program: string;
  readonly library: string;
  readonly staticProgram: string;
  /** A copy of the real loader at a path shorter than the default interpreter. */
  readonly shortLoader: string;
  /** A copy of the real loader at a path longer than the default interpreter. */
  readonly longLoader: string;
}

let work: string | undefined;
/** Short paths need a short directory: /tmp/ip-XXXXXX. */
let shortDir: string | undefined;
const built = new Map<BuildArch, Built>();
let copies = 0;

beforeAll(async () => {
  assertCliBuilt();
  for (const tool of ['gcc', 'aarch64-linux-gnu-gcc', 'qemu-aarch64', 'readelf', 'patchelf', 'eu-elflint']) requireTool(tool);
  if (!existsSync(PATCHELF_018))
    throw new Error(`no patchelf 0.18 at ${PATCHELF_018}: set PATCHELF_0_18, or run npm run bench:closure (it downloads it)`);
  const root = await realpath(await makeTempDir('set-interpreter'));
  work = root;
  const short = await mkdtemp('/tmp/ip-');
  shortDir = short;
  for (const arch of BUILD_ARCHES) {
    const dir = join(root, arch);
    await mkdir(dir, { recursive: true });
    const shortLoader = join(short, arch === 'x86_64' ? 'ld-x' : 'ld-a');
    const longLoader = join(root, arch, 'a', 'very', 'long', 'directory', 'for', 'the', 'loader', basename(loaderOf(arch)));
    await mkdir(join(longLoader, '..'), { recursive: true });
    await copyFile(loaderOf(arch), shortLoader);
    await copyFile(loaderOf(arch), longLoader);
    built.set(arch, {
      program: await compile(arch, dir, 'maps', { 'maps.c': MAPS_SOURCE }),
      library: await compile(arch, dir, 'libmaps.so', { 'maps.c': MAPS_SOURCE }, ['-shared', '-fPIC']),
      staticProgram: await compile(arch, dir, 'maps-static', { 'maps.c': MAPS_SOURCE }, ['-static']),
      shortLoader,
      longLoader,
    });
  }
}, 240_000);

afterAll(async () => {
  for (const dir of [shortDir, work]) if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

function builtFor(arch: BuildArch): Built {
  const found = built.get(arch);
  if (found === undefined) throw new Error(`nothing built for ${arch}`);
  return found;
}

async function copyOf(file: string): Promise<string> {
  const copy = join(work ?? '', `copy-${++copies}`);
  await copyFile(file, copy);
  return copy;
}

/** readelf's program headers, in table order: type, offset, file size. */
async function programHeaderRows(file: string): Promise<{ type: string; offset: number; vaddr: number; filesz: number }[]> {
  const text = await readelfText(['-l'], file);
  return [...text.matchAll(/^\s+([A-Z_]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)/gm)].map((m) => ({
    type: m[1] ?? '',
    offset: Number.parseInt(m[2] ?? '', 16),
    vaddr: Number.parseInt(m[3] ?? '', 16),
    filesz: Number.parseInt(m[4] ?? '', 16),
  }));
}

async function requestedInterpreter(file: string): Promise<string | null> {
  return /\[Requesting program interpreter: (.*)\]/.exec(await readelfText(['-l'], file))?.[1] ?? null;
}

/** eu-elflint's complaints, less the file name lines. */
async function elflint(file: string): Promise<string[]> {
  const result = await execTool(requireTool('eu-elflint'), ['--gnu-ld', file]);
  return `${result.stdout}${result.stderr}`.split('\n').filter((line) => line !== '' && line !== 'No errors');
}

function runsThrough(arch: BuildArch, file: string, loader: string): Promise<ExecResult> {
  return runOn(arch, file, []).then((result) => {
    expect(result.code, `${file}\n${describeRun(result)}`).toBe(0);
    expect(result.stdout).toBe(`loader ${loader}\n`);
    return result;
  });
}

describe.each(BUILD_ARCHES)('set-interpreter on a %s program', (arch) => {
  it('writes a shorter path in place: size, p_filesz and all else kept; the program runs through the new loader', async () => {
    const { program, shortLoader } = builtFor(arch);
    const file = await copyOf(program);
    const before = await readFile(file);
    expect(shortLoader.length).toBeLessThan(DEFAULT_INTERPRETER[arch].length);
    const result = await runCli(['set-interpreter', shortLoader, file]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe(
      `${file}: interpreter set to '${shortLoader}' (edited in place, ${DEFAULT_INTERPRETER[arch].length + 1} bytes written)\n`,
    );
    const after = await readFile(file);
    expect(after.length).toBe(before.length);
    expect(await requestedInterpreter(file)).toBe(shortLoader);
    // Only the path's bytes changed; PT_INTERP keeps its size (the kernel wants its last byte NUL, which it is).
    const rows = await programHeaderRows(file);
    expect(rows).toEqual(await programHeaderRows(program));
    const interp = rows.find((row) => row.type === 'INTERP');
    if (interp === undefined) throw new Error('no INTERP row');
    const changed = [...after.keys()].filter((i) => after[i] !== before[i]);
    expect(Math.min(...changed)).toBeGreaterThanOrEqual(interp.offset);
    expect(Math.max(...changed)).toBeLessThan(interp.offset + interp.filesz);
    expect(after.subarray(interp.offset, interp.offset + interp.filesz).toString('latin1')).toBe(
      shortLoader + '\0'.repeat(interp.filesz - shortLoader.length),
    );
    await runsThrough(arch, file, shortLoader);
    expect((await execTool(requireTool('patchelf'), ['--print-interpreter', file])).stdout).toBe(`${shortLoader}\n`);
    expect(await elflint(file)).toEqual(await elflint(program));
  });

  it('appends a longer path: PT_INTERP moves into the new segment, stays before the PT_LOADs, the old path is zeroed', async () => {
    const { program, longLoader } = builtFor(arch);
    const file = await copyOf(program);
    const result = await runCli(['set-interpreter', longLoader, file]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/interpreter set to '.*' \(tables copied to the end of the file, \d+ bytes written\)\n$/);
    expect(await requestedInterpreter(file)).toBe(longLoader);
    const rows = await programHeaderRows(file);
    const interpAt = rows.findIndex((row) => row.type === 'INTERP');
    expect(interpAt).toBeGreaterThanOrEqual(0);
    expect(interpAt).toBeLessThan(rows.findIndex((row) => row.type === 'LOAD'));
    const interp = rows[interpAt];
    if (interp === undefined) throw new Error('no INTERP row');
    expect(interp.filesz).toBe(longLoader.length + 1);
    // Mapped by a PT_LOAD at the same offset-to-address distance: glibc reads the path at p_vaddr.
    const load = rows.find(
      (row) => row.type === 'LOAD' && row.offset <= interp.offset && interp.offset + interp.filesz <= row.offset + row.filesz,
    );
    expect(load, 'a PT_LOAD maps the moved path').toBeDefined();
    expect(interp.vaddr - interp.offset).toBe((load?.vaddr ?? 0) - (load?.offset ?? 0));
    // The .interp section header follows PT_INTERP.
    const section = /\.interp\s+PROGBITS\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)/.exec(await readelfText(['-S'], file));
    expect(section?.slice(1).map((hex) => Number.parseInt(hex, 16))).toEqual([interp.vaddr, interp.offset, interp.filesz]);
    expect((await readFile(file)).includes(DEFAULT_INTERPRETER[arch])).toBe(false);
    await runsThrough(arch, file, longLoader);
    expect((await execTool(requireTool('patchelf'), ['--print-interpreter', file])).stdout).toBe(`${longLoader}\n`);
    expect(await elflint(file)).toEqual(await elflint(program));

    // The same path again writes nothing; print and print-interpreter show it.
    const bytes = await readFile(file);
    const again = await runCli(['set-interpreter', longLoader, file]);
    expect(again.stdout).toBe(`${file}: already as asked, nothing written\n`);
    expect((await readFile(file)).equals(bytes)).toBe(true);
    expect((await runCli(['print-interpreter', file])).stdout).toBe(`${longLoader}\n`);
    expect((await runCli(['print', file])).stdout).toContain(`  interpreter  ${longLoader}\n`);
  });

  it('refuses a library and a static program with one line and exit 3, and leaves them byte-identical', async () => {
    const { library, staticProgram, longLoader } = builtFor(arch);
    for (const [input, reason] of [
      [library, 'no interpreter (PT_INTERP) to set: the file is a library or statically linked'],
      [staticProgram, 'no dynamic section (PT_DYNAMIC): a statically linked file, nothing to edit'],
    ] as const) {
      const file = await copyOf(input);
      const { mtimeMs } = await stat(file);
      const result = await runCli(['set-interpreter', longLoader, file]);
      expect(result.code).toBe(3);
      expect(result.stdout).toBe('');
      expect(stderrLines(result)).toEqual([`cuda-patchelf: ${file}: ${reason}`]);
      expect((await readFile(file)).equals(await readFile(input))).toBe(true);
      expect((await stat(file)).mtimeMs).toBe(mtimeMs);
      const printed = await runCli(['print-interpreter', file]);
      expect(printed.code).toBe(3);
      expect(stderrLines(printed)).toHaveLength(1);
    }
    // An empty path (an unset variable) is a usage error before any file is read.
    const file = await copyOf(builtFor(arch).program);
    const empty = await runCli(['set-interpreter', '', file]);
    expect(empty.code).toBe(2);
    expect(stderrLines(empty)).toHaveLength(1);
    expect((await readFile(file)).equals(await readFile(builtFor(arch).program))).toBe(true);
  });

  it('answers --set-interpreter and --print-interpreter as patchelf 0.18 does', async () => {
    const { program, library, staticProgram, shortLoader, longLoader } = builtFor(arch);
    const cases: { input: string; args: string[] }[] = [
      { input: program, args: ['--set-interpreter', shortLoader] },
      { input: program, args: ['--set-interpreter', longLoader, '--print-interpreter'] },
      { input: program, args: ['--interpreter', longLoader] },
      { input: program, args: ['--set-interpreter', ''] },
      { input: program, args: ['--print-interpreter'] },
      { input: library, args: ['--set-interpreter', longLoader] },
      { input: library, args: ['--print-interpreter'] },
      { input: staticProgram, args: ['--set-interpreter', longLoader] },
      { input: staticProgram, args: ['--print-interpreter'] },
    ];
    for (const { input, args } of cases) {
      const ours = await copyOf(input);
      const theirs = await copyOf(input);
      const mine = await runCli([...args, ours]);
      const patchelf = await execTool(PATCHELF_018, [...args, theirs]);
      const what = `${args.join(' ')} on ${input}`;
      expect({ code: mine.code, stdout: mine.stdout }, what).toEqual({ code: patchelf.code, stdout: patchelf.stdout });
      expect(mine.stderr === '', `${what}: stderr ${mine.stderr}`).toBe(patchelf.stderr === '');
      // What each left reads the same to patchelf 0.18, and the program runs where it did.
      const readBack = async (file: string): Promise<[number | null, string]> => {
        const r = await execTool(PATCHELF_018, ['--print-interpreter', file]);
        return [r.code, r.stdout];
      };
      expect(await readBack(ours), what).toEqual(await readBack(theirs));
      if (patchelf.code !== 0) expect((await readFile(ours)).equals(await readFile(input)), `${what}: left alone`).toBe(true);
      if (input === program) expect((await runOn(arch, ours, [])).stdout, what).toBe((await runOn(arch, theirs, [])).stdout);
    }
  });
});
