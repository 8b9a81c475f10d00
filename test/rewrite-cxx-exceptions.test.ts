// A trap of docs/design.md's ELF facts: glibc finds a shared object's program header table at run time (for
// _dl_find_object / dl_iterate_phdr, which the C++ unwinder uses) through PT_PHDR, else through the
// first PT_LOAD whose page-rounded file range covers e_phoff. A table moved to the end of the file
// without PT_PHDR is "found" in the zeroed .bss tail of the RW segment and every exception thrown
// through that library ends in std::terminate; ld.so --list does not notice.
//
// Here the tables of a copy of Debian's libstdc++.so.6 and of a throwing library are forced to move
// (a runpath long enough that the table must grow, on files whose table cannot grow in place), and a
// program throws through both: the exception must still be caught, natively on x86_64 and under qemu
// on aarch64. A control with the new PT_PHDR entry blanked checks that glibc really behaves as docs/design.md says
// says for that layout, so that the positive result means something.

import { copyFile, mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProgramHeader } from '../src/elf/codec.js';
import type { Arch } from './helpers/arch.js';
import { REPO_ROOT, fixture, listDependencies, requireTool, runOn } from './helpers/fixtures.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { cliEditOne, copyFixture, describeExec, layoutProblems, readBack, type ReadBack } from './helpers/verify.js';
import { execTool, mustExec, type ExecResult } from './helpers/exec.js';
import { runReadelf } from './helpers/readelf.js';
import { PT } from '../src/elf/constants.js';

const CAUGHT = 'caught: hello from libgreet';
const LONG_RUNPATH = `/nix/store/${'c'.repeat(32)}-cuda-patchelf-cxx-exceptions-runpath-entry-long-enough-to-grow-every-string-table/lib`;
/** The page size glibc runs with here: the host's, natively and under qemu-user (AT_PAGESZ). */
const RUNTIME_PAGE = 0x1000;

interface Target {
  readonly arch: Arch;
  readonly variant: string;
  readonly libstdcxx: string;
  readonly cxx: string;
}

const TARGETS: readonly Target[] = [
  { arch: 'x86_64', variant: 'x86_64', libstdcxx: 'debian/x86_64/libstdc++6/libstdc++.so.6.0.30', cxx: 'g++' },
  { arch: 'aarch64', variant: 'aarch64-64k', libstdcxx: 'debian/aarch64/libstdc++6/libstdc++.so.6.0.30', cxx: 'aarch64-linux-gnu-g++' },
  { arch: 'aarch64', variant: 'aarch64-4k', libstdcxx: 'debian/aarch64/libstdc++6/libstdc++.so.6.0.30', cxx: 'aarch64-linux-gnu-g++' },
];

let work = '';
const controls = { terminate: 0, caught: 0 };
let caughtThroughMovedTables = 0;

beforeAll(async () => {
  for (const tool of ['g++', 'aarch64-linux-gnu-g++', 'ld.lld', 'qemu-aarch64']) requireTool(tool);
  work = await makeTempDir('cxx');
});

afterAll(async () => {
  if (work !== '') await rm(work, { recursive: true, force: true });
  console.log(
    `cxx exceptions: ${caughtThroughMovedTables} programs caught exceptions through moved tables; controls without PT_PHDR: ${controls.terminate} ended in std::terminate as predicted, ${controls.caught} still caught as predicted`,
  );
});

/**
 * fixtures/src/throw.cc linked by lld, which leaves no room after the program header table (and no
 * spare DT_NULL): the table of this throwing library cannot grow in place and must move.
 */
async function buildLldThrowLibrary(target: Target, libDir: string, scratch: string): Promise<string> {
  const shim = join(scratch, 'lld-shim');
  await mkdir(shim, { recursive: true });
  // A cross gcc finds ld.lld through -B (gcc 12 has no --ld-path).
  await symlink(requireTool('ld.lld'), join(shim, 'ld.lld')).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST') throw error;
  });
  const out = join(libDir, 'libthrow.so');
  const pageFlags = target.variant === 'aarch64-4k' ? ['-Wl,-z,max-page-size=4096'] : [];
  await mustExec(requireTool(target.cxx), [
    '-O2',
    '-fPIC',
    '-shared',
    `-B${shim}/`,
    '-fuse-ld=lld',
    ...pageFlags,
    '-Wl,-soname,libthrow.so',
    '-Wl,--enable-new-dtags,-rpath,$ORIGIN',
    '-o',
    out,
    join(REPO_ROOT, 'fixtures', 'src', 'throw.cc'),
    join(libDir, 'libgreet.so.1'),
  ]);
  return out;
}

/** Adds the long runpath through the CLI and checks the table moved, with PT_PHDR first. */
async function forceTableMove(arch: Arch, file: string): Promise<ReadBack> {
  const before = await readBack(file);
  const record = await cliEditOne(['add-runpath', LONG_RUNPATH], file);
  expect(record.tier, `${file}: the edit appends`).toBe('append');
  const after = await readBack(file);
  const { header, programHeaders } = after.image;
  expect(header.e_phoff, `${file}: the program header table moved`).not.toBe(before.image.header.e_phoff);
  const first = programHeaders[0] as ProgramHeader;
  expect(first.p_type, `${file}: entry 0 of the moved table is PT_PHDR`).toBe(PT.PT_PHDR);
  expect(first.p_offset).toBe(header.e_phoff);
  expect(first.p_filesz).toBe(header.phnum * header.e_phentsize);
  expect(programHeaders.filter((ph) => ph.p_type === PT.PT_PHDR)).toHaveLength(1);
  const covering = programHeaders.find(
    (ph) => ph.p_type === PT.PT_LOAD && first.p_offset >= ph.p_offset && first.p_offset + first.p_filesz <= ph.p_offset + ph.p_filesz,
  );
  expect(covering, `${file}: a PT_LOAD maps the moved table`).toBeDefined();
  expect(first.p_vaddr - (covering?.p_vaddr ?? 0)).toBe(first.p_offset - (covering?.p_offset ?? 0));
  expect(layoutProblems(arch, before, after).problems).toEqual([]);
  return after;
}

/**
 * Drops the section headers, as sstrip-like tools do: without them the sections after the program
 * header table cannot be moved out of its way, so a growing edit must move the table itself.
 */
async function withoutSectionHeaders(file: string): Promise<void> {
  const stripped = `${file}.no-sections`;
  const result = await execTool(process.execPath, [join(REPO_ROOT, 'fixtures', 'tools', 'strip-section-headers.mjs'), file, stripped]);
  expect(result.code, result.stderr).toBe(0);
  await copyFile(stripped, file);
  await rm(stripped);
}

/** Adds the long runpath through the CLI; the table grows where it is, after what followed it moved. */
async function growTableInPlace(arch: Arch, file: string): Promise<ReadBack> {
  const before = await readBack(file);
  const record = await cliEditOne(['add-runpath', LONG_RUNPATH], file);
  expect(record.tier, `${file}: the edit appends`).toBe('append');
  const after = await readBack(file);
  expect(after.image.header.e_phoff, `${file}: the table stays where it was`).toBe(before.image.header.e_phoff);
  expect(after.image.header.phnum, `${file}: the table grew by the new PT_LOAD`).toBe(before.image.header.phnum + 1);
  expect(layoutProblems(arch, before, after).problems).toEqual([]);
  // The copy the table had in the new segment while the tags switched was cut off the file: the
  // entries it shares with the grown table (all but the new PT_LOAD) are in the file once.
  const bytes = await readFile(file);
  const shared = bytes.subarray(
    after.image.header.e_phoff,
    after.image.header.e_phoff + before.image.header.phnum * after.image.header.e_phentsize,
  );
  expect(bytes.indexOf(shared), `${file}: the grown table`).toBe(after.image.header.e_phoff);
  expect(bytes.indexOf(shared, after.image.header.e_phoff + 1), `${file}: a second copy of the table`).toBe(-1);
  return after;
}

/**
 * Where glibc would look for the table of this file without PT_PHDR: true when the first PT_LOAD whose
 * page-rounded file range covers it zeroes those bytes (they lie past p_filesz in a segment with .bss).
 */
function tableFoundInZeroedTail(file: ReadBack): boolean {
  const { header, programHeaders } = file.image;
  const size = header.phnum * header.e_phentsize;
  const covering = programHeaders.find((ph) => {
    if (ph.p_type !== PT.PT_LOAD) return false;
    const start = Math.floor(ph.p_offset / RUNTIME_PAGE) * RUNTIME_PAGE;
    const end = Math.ceil((ph.p_offset + ph.p_filesz) / RUNTIME_PAGE) * RUNTIME_PAGE;
    return start <= header.e_phoff && header.e_phoff + size <= end;
  });
  if (covering === undefined) return false;
  return covering.p_memsz > covering.p_filesz && header.e_phoff + size > covering.p_offset + covering.p_filesz;
}

/** A copy of `file` whose PT_PHDR entry (entry 0) is turned into PT_NULL. */
async function withoutPhdrEntry(file: string, back: ReadBack, to: string): Promise<void> {
  const bytes = await readFile(file);
  const { e_phoff } = back.image.header;
  if (back.image.codec.littleEndian) bytes.writeUInt32LE(PT.PT_NULL, e_phoff);
  else bytes.writeUInt32BE(PT.PT_NULL, e_phoff);
  await writeFile(to, bytes);
}

function runThrow(target: Target, program: string, libDir: string): Promise<ExecResult> {
  return runOn(target.arch, program, [], { LD_LIBRARY_PATH: libDir });
}

describe.concurrent('exceptions thrown through libraries whose program header table moved', () => {
  for (const target of TARGETS) {
    it(`${target.variant}: libstdc++.so.6 and an lld-linked throwing library, both moved`, async () => {
      const scratch = join(work, `${target.variant}-both`);
      const copy = await copyFixture(fixture(`compiled/${target.variant}/cxx-throw`), scratch);
      const libstdcxx = join(copy.libDir, 'libstdc++.so.6');
      await copyFile(fixture(target.libstdcxx).path, libstdcxx);
      const libthrow = await buildLldThrowLibrary(target, copy.libDir, scratch);

      // The copies are the ones loaded, and the unedited setup catches the exception.
      const listed = await listDependencies(copy.file, target.arch, copy.libDir);
      expect(listed.code, describeExec('ld.so --list', listed)).toBe(0);
      expect(listed.stdout).toContain(`libstdc++.so.6 => ${libstdcxx}`);
      expect(listed.stdout).toContain(`libthrow.so => ${libthrow}`);
      const baseline = await runThrow(target, copy.file, copy.libDir);
      expect(baseline.stdout.trim(), describeExec('before the edits', baseline)).toBe(CAUGHT);

      await withoutSectionHeaders(libstdcxx);
      await withoutSectionHeaders(libthrow);
      const movedLibstdcxx = await forceTableMove(target.arch, libstdcxx);
      const movedLibthrow = await forceTableMove(target.arch, libthrow);

      const run = await runThrow(target, copy.file, copy.libDir);
      expect(run.code, describeExec('throw through the moved tables', run)).toBe(0);
      expect(run.stdout.trim()).toBe(CAUGHT);
      caughtThroughMovedTables++;

      // Control: the same files without the new PT_PHDR behave as docs/design.md predicts for their layout.
      for (const [name, moved, path] of [
        ['libstdc++.so.6', movedLibstdcxx, libstdcxx],
        ['libthrow.so', movedLibthrow, libthrow],
      ] as const) {
        const controlDir = join(scratch, `control-${name}`);
        const control = await copyFixture(fixture(`compiled/${target.variant}/cxx-throw`), controlDir);
        await copyFile(libstdcxx, join(control.libDir, 'libstdc++.so.6'));
        await copyFile(libthrow, join(control.libDir, 'libthrow.so'));
        await withoutPhdrEntry(path, moved, join(control.libDir, name));
        const result = await runThrow(target, control.file, control.libDir);
        if (tableFoundInZeroedTail(moved)) {
          expect(result.code, describeExec(`${name} without PT_PHDR: glibc reads a zeroed table`, result)).not.toBe(0);
          expect(result.stderr).toMatch(/terminate called/);
          controls.terminate++;
        } else {
          expect(result.stdout.trim(), describeExec(`${name} without PT_PHDR: glibc still finds the table`, result)).toBe(CAUGHT);
          controls.caught++;
        }
      }
    });

    it(`${target.variant}: the fixture's throwing library and libstdc++.so.6, whose table grew where it is after .gnu.hash and notes moved`, async () => {
      const scratch = join(work, `${target.variant}-fixture`);
      const copy = await copyFixture(fixture(`compiled/${target.variant}/cxx-throw`), scratch);
      const libstdcxx = join(copy.libDir, 'libstdc++.so.6');
      await copyFile(fixture(target.libstdcxx).path, libstdcxx);
      await growTableInPlace(target.arch, libstdcxx);
      const libthrow = join(copy.libDir, 'libthrow.so');
      const before = await readBack(libthrow);
      const record = await cliEditOne(['add-runpath', LONG_RUNPATH], libthrow);
      expect(record.tier).toBe('append');
      expect(layoutProblems(target.arch, before, await readBack(libthrow)).problems).toEqual([]);
      const run = await runThrow(target, copy.file, copy.libDir);
      expect(run.code, describeExec('throw through the edited libraries', run)).toBe(0);
      expect(run.stdout.trim()).toBe(CAUGHT);
      const listed = await runReadelf(['-d'], libthrow);
      expect(listed.stdout).toContain(LONG_RUNPATH);
    });
  }
});
