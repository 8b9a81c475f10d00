// Tier 4, the whole-file rewrite, on the executables that need it: a fixed-address program whose
// program header table has no room to grow (moved into .rodata, nothing movable after it) and whose
// .bss (96 MiB) puts the address where the kernel would look for a moved table far past the file's
// end. Natively on x86_64, under qemu-aarch64 on aarch64 (64 KiB pages); proved with readelf,
// patchelf, eu-elflint, strip and the programs themselves.

import { spawn } from 'node:child_process';
import { watch } from 'node:fs';
import { chown, link, lstat, readFile, readdir, rm, stat, symlink, chmod, writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { type BuildArch, machinePageSizeOf, BUILD_ARCHES } from './helpers/arch.js';
import { crossTool, requireTool, runOn } from './helpers/fixtures.js';
import { compile, describeRun, fileState, loadProblems } from './helpers/rw-build.js';
import { dynamicStrings, programHeaders, elfHeader, symbolAddress, offsetOfAddress, type SegmentRow } from './helpers/readelf.js';
import { execTool, mustExec } from './helpers/exec.js';
import { relocateProgramHeaders } from './helpers/rw-elf.js';
import type { Fixture } from './helpers/fixtures.js';
import { runFuzz } from './fuzz/fuzz-campaign.js';
import { editElfFile } from '../src/edit/edit-file.js';
import { textToByteString } from '../src/elf/byte-string.js';
import { assertCliBuilt, cliPath, runCli, type CliResult } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';
import { makeTempDir, MEMORY_TMP } from './helpers/temp-dir.js';

const ROOM = 1024;
/** Inputs of the fuzzed slice per architecture (a few seconds each). */
const FUZZ_ITERATIONS = 1500;
const RUNPATH =
  '/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_compat-12.2/compat:/run/opengl-driver/lib:$ORIGIN/../lib/long/enough/never/to/fit/in/place';
const OUTPUT = 'big bss fine 28672\n';

const SOURCE = `#include <stdio.h>
#include <string.h>
__attribute__((used, aligned(64))) const unsigned char phdr_room[${ROOM}] = { 1 };
static char big[96 << 20];
int main(void) {
  memset(big + (95 << 20), 7, 4096);
  unsigned sum = 0;
  for (int i = 0; i < 4096; i++) sum += big[(95 << 20) + i];
  printf("big bss fine %u\\n", sum);
  return 0;
}
`;

const work = useTempDir('rw-whole-file');
let counter = 0;

beforeAll(async () => {
  assertCliBuilt();
  for (const tool of ['readelf', 'gcc', 'aarch64-linux-gnu-gcc', 'qemu-aarch64', 'patchelf', 'eu-elflint']) requireTool(tool);
});

async function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { timeoutMs: 60_000 });
}

async function runOk(arch: BuildArch, file: string): Promise<string> {
  const result = await runOn(arch, file, []);
  expect(result.code, `${file}\n${describeRun(result)}`).toBe(0);
  return result.stdout;
}

/** eu-elflint's complaints about a file, with its name taken out. */
async function elflint(file: string): Promise<string[]> {
  const result = await execTool(requireTool('eu-elflint'), ['--gnu-ld', file]);
  return result.stdout
    .split('\n')
    .filter((line) => line !== '' && line !== 'No errors')
    .map((line) => line.replaceAll(file, '<file>'));
}

const loads = (rows: readonly SegmentRow[]): SegmentRow[] => rows.filter((r) => r.type === 'LOAD');

/** The program, linked, with its table moved into .rodata where nothing after it can move (no spare slot). */
async function tableWithoutRoom(arch: BuildArch, flags: readonly string[] = ['-no-pie']): Promise<{ dir: string; program: string }> {
  const dir = join(work(), `${arch}-${++counter}`);
  await mkdir(dir, { recursive: true });
  const linked = await compile(arch, dir, 'prog.linked', { 'prog.c': SOURCE }, ['-O1', '-Wl,-z,noseparate-code', ...flags]);
  const rows = await programHeaders(linked);
  const roomOffset = offsetOfAddress(rows, await symbolAddress(linked, 'phdr_room'));
  const program = join(dir, 'prog');
  await writeFile(
    program,
    relocateProgramHeaders(new Uint8Array(await readFile(linked)), {
      roomOffset,
      roomSize: ROOM,
      spareNullEntries: 0,
      occupyOldPlace: true,
    }),
    { mode: 0o755 },
  );
  expect(await runOk(arch, program)).toBe(OUTPUT);
  return { dir, program };
}

describe.each(BUILD_ARCHES)('%s', (arch) => {
  it('an executable whose table has no room is rewritten: a first page of its own for the headers, and it runs', async () => {
    const { dir, program } = await tableWithoutRoom(arch);
    const lintBefore = await elflint(program);
    const before = await stat(program);
    const beforeRows = await programHeaders(program);
    const result = await cli(['set-runpath', RUNPATH, program, '--json']);
    expect(result.code, result.stderr).toBe(0);
    expect((JSON.parse(result.stdout) as { tier: string }[])[0]?.tier).toBe('rewrite');

    // A new file took the old one's name, with its mode; no temporary file is left next to it.
    const after = await stat(program);
    expect(after.ino).not.toBe(before.ino);
    expect(after.mode).toBe(before.mode);
    expect((await readdir(dir)).sort()).toEqual(['prog', 'prog.c', 'prog.linked']);

    const rows = await programHeaders(program);
    const header = await elfHeader(program);
    const page = machinePageSizeOf(arch);
    // The old file moved by whole pages behind a first page that holds the ELF header and the table.
    expect(header.phoff).toBe(64);
    const [first, ...rest] = loads(rows);
    expect(first).toMatchObject({ offset: 0, align: page });
    expect(first?.filesz).toBe(page);
    const shifted = loads(beforeRows).map((l) => ({ vaddr: l.vaddr, memsz: l.memsz, offset: l.offset + page }));
    expect(rest.slice(0, shifted.length).map((l) => ({ vaddr: l.vaddr, memsz: l.memsz, offset: l.offset }))).toEqual(shifted);
    expect((first?.vaddr ?? 0) + page).toBe(loads(beforeRows)[0]?.vaddr);
    // Every way of finding the table agrees: PT_PHDR (Linux ≥ 5.18, glibc), the first PT_LOAD's
    // p_vaddr - p_offset + e_phoff (older Linux), the lowest p_vaddr - p_offset + e_phoff (qemu-user).
    const phdr = rows.find((r) => r.type === 'PHDR');
    expect(rows[0]?.type).toBe('PHDR');
    expect(phdr?.vaddr).toBe((first?.vaddr ?? 0) + header.phoff);
    expect(Math.min(...loads(rows).map((l) => l.vaddr - l.offset)) + header.phoff).toBe(phdr?.vaddr);
    expect(phdr?.memsz).toBe(header.phnum * 56);
    expect(loadProblems(rows)).toEqual([]);

    expect(await dynamicStrings(program, 'RUNPATH')).toEqual([RUNPATH]);
    expect((await mustExec(requireTool('patchelf'), ['--print-rpath', program])).stdout.trim()).toBe(RUNPATH);
    expect(await elflint(program)).toEqual(lintBefore);
    expect(await runOk(arch, program)).toBe(OUTPUT);

    // The same edit again asks for nothing; another edit fits in the room the first page left.
    const bytes = await fileState(program);
    const again = await cli(['set-runpath', RUNPATH, program, '--json']);
    expect((JSON.parse(again.stdout) as { tier: string }[])[0]?.tier).toBe('noop');
    expect(await fileState(program)).toEqual(bytes);
    const more = await cli(['add-needed', 'libm.so.6', program, '--json']);
    expect(more.code, more.stderr).toBe(0);
    expect(['in-place', 'append']).toContain((JSON.parse(more.stdout) as { tier: string }[])[0]?.tier);
    expect(await runOk(arch, program)).toBe(OUTPUT);

    // strip takes the result, and the stripped program runs.
    const stripped = join(dir, 'prog.stripped');
    await mustExec(crossTool(arch, 'strip'), ['-o', stripped, program]);
    expect(await runOk(arch, stripped)).toBe(OUTPUT);
  });

  it.each([
    { op: ['add-runpath', '--force-rpath', '--dedupe', RUNPATH], tag: 'RPATH', value: RUNPATH },
    { op: ['add-runpath', '--append', '--dedupe', RUNPATH], tag: 'RUNPATH', value: RUNPATH },
    { op: ['add-needed', 'libm.so.6'], tag: 'NEEDED', value: 'libm.so.6' },
  ])('$op.0 $op.1 takes the rewrite too, reads back, runs, and is a noop the second time', async ({ op, tag, value }) => {
    const { program } = await tableWithoutRoom(arch);
    const result = await cli([...op, program, '--json']);
    expect(result.code, result.stderr).toBe(0);
    expect((JSON.parse(result.stdout) as { tier: string }[])[0]?.tier).toBe('rewrite');
    // patchelf's own flag reads the same value back.
    if (tag === 'NEEDED') expect((await mustExec(requireTool('patchelf'), ['--print-needed', program])).stdout).toContain(value);
    expect(await dynamicStrings(program, tag)).toContain(value);
    expect(await runOk(arch, program)).toBe(OUTPUT);
    const bytes = await fileState(program);
    expect((await cli([...op, program])).code).toBe(0);
    expect(await fileState(program)).toEqual(bytes);
  });

  it("the caller's operations run once, though the plan moves to the rewrite's layout", async () => {
    const { program } = await tableWithoutRoom(arch);
    let runs = 0;
    const result = await editElfFile(program, (editor) => {
      runs++;
      editor.setRunpath(textToByteString(RUNPATH));
    });
    expect(result.tier).toBe('rewrite');
    expect(runs).toBe(1);
    expect(await runOk(arch, program)).toBe(OUTPUT);
  });

  it('apply rewrites it (the dry run writes nothing), names the tier, and check then finds nothing to do', async () => {
    const { dir, program } = await tableWithoutRoom(arch);
    const dry = await cli([
      'apply',
      dir,
      '--dry-run',
      '--json',
      '--cuda-compat',
      '/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_compat',
    ]);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toMatch(/rewrite/);
    const untouched = await fileState(program);
    const applied = await cli(['apply', dir, '--cuda-compat', '/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_compat']);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toMatch(/rewrite/);
    expect((await fileState(program)).sha256).not.toBe(untouched.sha256);
    expect(await runOk(arch, program)).toBe(OUTPUT);
    expect((await cli(['check', dir, '--cuda-compat', '/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_compat'])).code).toBe(0);
  });

  it('the temporary file a killed rewrite leaves behind is skipped by apply, never patched or removed', async () => {
    const { dir, program } = await tableWithoutRoom(arch);
    const leftover = join(dir, '.prog.cuda-patchelf-rewrite-4242');
    await writeFile(leftover, (await readFile(program)).subarray(0, 4096), { mode: 0o600 });
    const before = await fileState(leftover);
    const result = await cli(['apply', dir, '--json']);
    expect(result.code, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout) as { files: { path: string; status: string; reason?: string; tier?: string }[] };
    expect(report.files.find((f) => f.path === leftover)).toEqual({ path: leftover, status: 'skipped', reason: 'rewrite-temporary' });
    expect(report.files.find((f) => f.path === program)?.tier).toBe('rewrite');
    expect(await fileState(leftover)).toEqual(before);
  });

  it('a file with another hard link is refused (a new inode would split them), both names untouched', async () => {
    const { dir, program } = await tableWithoutRoom(arch);
    const other = join(dir, 'prog.other-name');
    await link(program, other);
    const before = await fileState(program);
    const result = await cli(['set-runpath', RUNPATH, program]);
    expect(result.code).toBe(3);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toContain(
      `${program}: the edit needs a whole-file rewrite, which would split the file's 2 hard links; left alone`,
    );
    expect(await fileState(program)).toEqual(before);
    expect((await stat(program)).ino).toBe((await stat(other)).ino);
  });

  it('a read-only file is refused without --make-writable, and keeps its mode with it', async () => {
    const { program } = await tableWithoutRoom(arch);
    await chmod(program, 0o555);
    const before = await fileState(program);
    const refused = await cli(['set-runpath', RUNPATH, program]);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain('read-only file (mode 555)');
    expect(await fileState(program)).toEqual(before);
    const done = await cli(['set-runpath', RUNPATH, program, '--make-writable', '--json']);
    expect(done.code, done.stderr).toBe(0);
    expect((JSON.parse(done.stdout) as { tier: string }[])[0]?.tier).toBe('rewrite');
    expect((await stat(program)).mode & 0o7777).toBe(0o555);
    expect(await runOk(arch, program)).toBe(OUTPUT);
  });

  it('the new file keeps the owner and the mode of the old one, set-user-ID bit included', async () => {
    const { program } = await tableWithoutRoom(arch);
    await chown(program, 65534, 65534);
    await chmod(program, 0o4751);
    const result = await cli(['set-runpath', RUNPATH, program, '--json']);
    expect(result.code, result.stderr).toBe(0);
    expect((JSON.parse(result.stdout) as { tier: string }[])[0]?.tier).toBe('rewrite');
    const after = await stat(program);
    expect({ uid: after.uid, gid: after.gid, mode: after.mode & 0o7777 }).toEqual({ uid: 65534, gid: 65534, mode: 0o4751 });
  });

  it('--output writes the rewritten file there and leaves the input alone', async () => {
    const { dir, program } = await tableWithoutRoom(arch);
    const before = await fileState(program);
    const output = join(dir, 'prog.out');
    const result = await cli(['set-runpath', RUNPATH, program, '--output', output, '--json']);
    expect(result.code, result.stderr).toBe(0);
    expect((JSON.parse(result.stdout) as { tier: string }[])[0]?.tier).toBe('rewrite');
    expect(await fileState(program)).toEqual(before);
    expect(await dynamicStrings(output, 'RUNPATH')).toEqual([RUNPATH]);
    expect(await runOk(arch, output)).toBe(OUTPUT);
  });

  it('--output to an existing file with another hard link, through a symbolic link: that inode gets the rewritten bytes, no temporary file', async () => {
    const { dir, program } = await tableWithoutRoom(arch);
    const before = await fileState(program);
    await writeFile(join(dir, 'out'), 'an older output');
    await chmod(join(dir, 'out'), 0o700);
    await link(join(dir, 'out'), join(dir, 'out-too'));
    await symlink('out', join(dir, 'out-link'));
    const outBefore = await stat(join(dir, 'out'));
    const result = await cli(['set-runpath', RUNPATH, program, '--output', join(dir, 'out-link'), '--json']);
    expect(result.code, result.stderr).toBe(0);
    expect((JSON.parse(result.stdout) as { tier: string }[])[0]?.tier).toBe('rewrite');
    expect(await fileState(program)).toEqual(before);
    const outAfter = await stat(join(dir, 'out'));
    expect({ ino: outAfter.ino, mode: outAfter.mode & 0o7777, nlink: outAfter.nlink }).toEqual({
      ino: outBefore.ino,
      mode: 0o700,
      nlink: 2,
    });
    expect((await lstat(join(dir, 'out-link'))).isSymbolicLink()).toBe(true);
    expect(await dynamicStrings(join(dir, 'out-too'), 'RUNPATH')).toEqual([RUNPATH]);
    expect(await runOk(arch, join(dir, 'out'))).toBe(OUTPUT);
    expect((await readdir(dir)).sort()).toEqual(['out', 'out-link', 'out-too', 'prog', 'prog.c', 'prog.linked']);
  });

  it('through a symbolic link, in place or as its own --output: the link stays and its target is rewritten', async () => {
    for (const args of [
      (link: string) => ['set-runpath', RUNPATH, link],
      (link: string, program: string) => ['--set-rpath', RUNPATH, '--output', program, link],
    ]) {
      const { dir, program } = await tableWithoutRoom(arch);
      await symlink('prog', join(dir, 'prog-link'));
      const result = await cli(args(join(dir, 'prog-link'), program));
      expect(result.code, result.stderr).toBe(0);
      expect((await lstat(join(dir, 'prog-link'))).isSymbolicLink()).toBe(true);
      expect(await dynamicStrings(program, 'RUNPATH')).toEqual([RUNPATH]);
      expect(await runOk(arch, program)).toBe(OUTPUT);
      expect((await readdir(dir)).sort()).toEqual(['prog', 'prog-link', 'prog.c', 'prog.linked']);
    }
  });

  it('a position-independent executable in the same state is refused: nothing is free below address 0', async () => {
    const { program } = await tableWithoutRoom(arch, ['-fPIE', '-pie']);
    const before = await fileState(program);
    const result = await cli(['set-runpath', RUNPATH, program]);
    expect(result.code).toBe(3);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toContain(
      'nor can a whole-file rewrite help: a position-independent file has no addresses free below its first segment',
    );
    expect(await fileState(program)).toEqual(before);
  });
  it('fuzzed: mutations of such a program through every edit, 0 crashes, hangs or wrong results, rewrites among them', async () => {
    const { program } = await tableWithoutRoom(arch);
    const workDir = await makeTempDir(`rewrite-fuzz-${arch}`, MEMORY_TMP);
    onTestFinished(() => rm(workDir, { recursive: true, force: true }));
    const base = { id: `rewrite/${arch}/no-room`, path: program } as Fixture;
    const { figures, failures } = await runFuzz({
      seed: 0x4e,
      iterations: FUZZ_ITERATIONS,
      workDir,
      bases: [base],
      timeCapMs: 2_000,
      rssCapBytes: 1024 * 2 ** 20,
    });
    console.info(`${arch} rewrite fuzz: ${JSON.stringify(figures)}`);
    expect(failures.map((f) => `iteration ${f.iteration}: ${f.mutation}; ${f.operation}: ${f.problems.join('; ')}`)).toEqual([]);
    expect(figures.crashes + figures.hangs + figures.wrongResults + figures.memoryOverruns).toBe(0);
    expect(figures.writtenTiers.rewrite ?? 0).toBeGreaterThan(FUZZ_ITERATIONS / 10);
  }, 300_000);

  it('killed at random moments (--durable), the file is always its original or the finished result', async () => {
    // 48 MiB of initialised data: copying the file takes long enough for kills to land inside the rewrite.
    const dataSource = SOURCE.replace('static char big[96 << 20];', 'static char big[96 << 20];\nchar filled[48 << 20] = { 1 };');
    // On tmpfs where there is one: --durable's fsyncs of 50 MiB on a busy disk take seconds each.
    const dir = await makeTempDir(`rewrite-kill-${arch}`, MEMORY_TMP);
    onTestFinished(() => rm(dir, { recursive: true, force: true }));
    const linked = await compile(arch, dir, 'prog.linked', { 'prog.c': dataSource }, ['-O1', '-no-pie', '-Wl,-z,noseparate-code']);
    const rows = await programHeaders(linked);
    const roomOffset = offsetOfAddress(rows, await symbolAddress(linked, 'phdr_room'));
    const original = relocateProgramHeaders(new Uint8Array(await readFile(linked)), {
      roomOffset,
      roomSize: ROOM,
      spareNullEntries: 0,
      occupyOldPlace: true,
    });
    const program = join(dir, 'prog');
    const write = (): Promise<void> => writeFile(program, original, { mode: 0o755 });
    await write();
    const done = await cli(['set-runpath', RUNPATH, program, '--json']);
    expect((JSON.parse(done.stdout) as { tier: string }[])[0]?.tier).toBe('rewrite');
    const finished = await readFile(program);
    const elapsed = done.ms;
    let killedInside = 0;
    for (let round = 0; round < 12; round++) {
      await write();
      // Even rounds kill as soon as the temporary file appears (inside the rewrite, the copy under way),
      // odd ones at moments spread over a whole run (before it starts, or after the rename).
      const watcher = watch(dir);
      const created = new Promise((resolve) =>
        watcher.on('change', (_event, name) => String(name).includes('.cuda-patchelf-rewrite-') && resolve(null)),
      );
      const child = spawn(process.execPath, [cliPath, 'set-runpath', RUNPATH, program, '--durable'], { stdio: 'ignore' });
      const exited = new Promise((resolve) => child.once('exit', resolve));
      await (round % 2 === 0 ? Promise.race([created, exited]) : new Promise((resolve) => setTimeout(resolve, (elapsed * round) / 12)));
      child.kill('SIGKILL');
      await exited;
      watcher.close();
      const now = await readFile(program);
      const state = Buffer.compare(now, original) === 0 ? 'original' : Buffer.compare(now, finished) === 0 ? 'finished' : 'broken';
      expect(state, `round ${round}`).not.toBe('broken');
      const leftovers = (await readdir(dir)).filter((name) => name.includes('.cuda-patchelf-rewrite-'));
      if (state === 'original' && leftovers.length > 0) killedInside++;
      expect(await runOk(arch, program)).toBe(OUTPUT);
      // The next run finishes the job whatever the kill left: the same bytes as an uninterrupted run.
      const again = await cli(['set-runpath', RUNPATH, program]);
      expect(again.code, again.stderr).toBe(0);
      expect(Buffer.compare(await readFile(program), finished)).toBe(0);
      for (const name of leftovers) await rm(join(dir, name));
    }
    console.info(`${arch} rewrite killed 12 times: ${killedInside} inside the rewrite (a temporary file, the original in place)`);
    // Some kills must have landed inside the rewrite (a temporary file, the original still in place).
    expect(killedInside).toBeGreaterThan(0);
  }, 300_000);
});
