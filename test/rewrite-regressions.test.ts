// One regression per patchelf bug that docs/design.md lists, each on an input linked (or transformed) to provoke it,
// checked with binutils and a real loader: natively on x86_64, under qemu-aarch64 on aarch64.

import { copyFile, cp, mkdir, readFile, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { editElfFile } from '../src/edit/edit-file.js';
import { type BuildArch, machinePageSizeOf, BUILD_ARCHES } from './helpers/arch.js';
import { fixtures, listDependencies, programVars, requireTool, runOn, type Fixture } from './helpers/fixtures.js';
import { compile, defaultLinkerScript, describeRun, loadProblems } from './helpers/rw-build.js';
import {
  dynamicNumber,
  dynamicRows,
  dynamicStrings,
  programHeaders,
  sectionRows,
  section,
  elfHeader,
  symbolAddress,
  offsetOfAddress,
  type SegmentRow,
  readelfText,
  interpreterOf,
} from './helpers/readelf.js';
import { relocateProgramHeaders } from './helpers/rw-elf.js';
import { assertCliBuilt, runCli, type CliResult } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';

/** Longer than any .dynstr slack of these small inputs: the table must be copied or grown. */
const LONG_RUNPATH = [
  '/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_compat-12.2/compat',
  '/run/opengl-driver/lib',
  '$ORIGIN/../lib/with/a/long/tail/so/that/it/never/fits/in/place',
].join(':');

const work = useTempDir('rw-regressions');

beforeAll(async () => {
  assertCliBuilt();
  for (const tool of ['readelf', 'gcc', 'aarch64-linux-gnu-gcc', 'ld.lld', 'qemu-aarch64']) requireTool(tool);
});

async function dir(name: string): Promise<string> {
  const path = join(work(), name);
  await mkdir(path, { recursive: true });
  return path;
}

async function cli(args: readonly string[]): Promise<CliResult> {
  const result = await runCli(args, { timeoutMs: 60_000 });
  expect(result.code, `cuda-patchelf ${args.join(' ')}\n${result.stderr}`).toBe(0);
  return result;
}

async function tierOf(args: readonly string[]): Promise<string> {
  const result = await cli([...args, '--json']);
  const records = JSON.parse(result.stdout) as { tier?: string }[];
  return records[0]?.tier ?? 'none';
}

async function runOk(
  arch: BuildArch,
  file: string,
  options: { readonly libraryPath?: string; readonly env?: Record<string, string> } = {},
): Promise<string> {
  const result = await runOn(arch, file, [], programVars(options.libraryPath, options.env));
  expect(result.code, `${file}\n${describeRun(result)}`).toBe(0);
  return result.stdout;
}

const loads = (rows: readonly SegmentRow[]): SegmentRow[] => rows.filter((r) => r.type === 'LOAD');
const one = (rows: readonly SegmentRow[], type: string): SegmentRow => {
  const found = rows.find((r) => r.type === type);
  if (found === undefined) throw new Error(`no ${type} program header`);
  return found;
};

describe.each(BUILD_ARCHES)('%s', (arch) => {
  it('#244/#531: growing the program header table over .interp and notes leaves .rodata that follows them intact', async () => {
    const d = await dir(`${arch}-rodata`);
    // .rodata goes right after the notes in the first LOAD: the bytes that follow the table are the
    // interpreter, the notes, then the program's string constants, with no page of slack in between.
    const script = (await defaultLinkerScript(arch, d, ['-no-pie'])).split('\n');
    const buildId = script.findIndex((line) => /^\s*\.note\.gnu\.build-id\s*:/.test(line));
    expect(buildId).toBeGreaterThan(0);
    const edited = script.filter((line) => !/^\s*\.rodata\s+:/.test(line));
    edited.splice(
      buildId + 1,
      0,
      '  .note.gnu.property : { *(.note.gnu.property) }',
      '  .note.ABI-tag : { *(.note.ABI-tag) }',
      '  .rodata : { *(.rodata .rodata.* .gnu.linkonce.r.*) }',
    );
    await writeFile(join(d, 'rodata.ld'), edited.join('\n'));
    const message = 'rodata intact: the quick brown fox jumps over the lazy dog 0123456789';
    const program = await compile(
      arch,
      d,
      'prog',
      { 'prog.c': `#include <stdio.h>\nstatic const char message[] = "${message}";\nint main(void) { puts(message); return 0; }\n` },
      ['-no-pie', '-Wl,--build-id=sha1', '-Wl,-T,rodata.ld'],
    );

    const header = await elfHeader(program);
    const rodata = await section(program, '.rodata');
    const before = await programHeaders(program);
    const tableEnd = header.phoff + header.phnum * 56;
    const between = (await sectionRows(program)).filter((s) => s.offset >= tableEnd && s.offset < rodata.offset).map((s) => s.name);
    // The input must be the layout the bug needs; otherwise this test would prove nothing.
    expect(before.some((r) => r.type === 'NULL')).toBe(false);
    expect(between.every((name) => name === '.interp' || name.startsWith('.note'))).toBe(true);
    expect(rodata.offset - tableEnd).toBeLessThan(0x100);
    expect(loads(before)[0]?.offset).toBe(0);
    expect(rodata.offset + rodata.size).toBeLessThanOrEqual(loads(before)[0]?.filesz ?? 0);
    expect(await runOk(arch, program)).toBe(`${message}\n`);
    const rodataBytes = (await readFile(program)).subarray(rodata.offset, rodata.offset + rodata.size);

    expect(await tierOf(['set-runpath', LONG_RUNPATH, program])).toBe('append');

    const after = await elfHeader(program);
    // The table grew where it is, over the interpreter and notes it moved away.
    expect(after.phoff).toBe(header.phoff);
    expect(after.phnum).toBe(header.phnum + 1);
    expect(Buffer.compare((await readFile(program)).subarray(rodata.offset, rodata.offset + rodata.size), rodataBytes)).toBe(0);
    expect(await section(program, '.rodata')).toEqual(rodata);
    expect(loadProblems(await programHeaders(program))).toEqual([]);
    expect(await dynamicStrings(program, 'RUNPATH')).toEqual([LONG_RUNPATH]);
    expect(await runOk(arch, program)).toBe(`${message}\n`);
  });

  it('#244/#531: .rodata right after the program header table is never overwritten; the table moves where the loader finds it, or the edit is refused', async () => {
    const d = await dir(`${arch}-rodata-first`);
    const script = (await defaultLinkerScript(arch, d, ['-no-pie'])).split('\n');
    const interp = script.findIndex((line) => /^\s*\.interp\s*:/.test(line));
    expect(interp).toBeGreaterThan(0);
    const edited = script.filter((line) => !/^\s*\.rodata\s+:/.test(line));
    edited.splice(interp, 0, '  .rodata : { *(.rodata .rodata.* .gnu.linkonce.r.*) }');
    await writeFile(join(d, 'rodata-first.ld'), edited.join('\n'));
    const message = 'rodata right after the headers: 0123456789 abcdefghijklmnopqrstuvwxyz';
    const program = await compile(
      arch,
      d,
      'prog',
      { 'prog.c': `#include <stdio.h>\nstatic const char message[] = "${message}";\nint main(void) { puts(message); return 0; }\n` },
      ['-no-pie', '-Wl,-T,rodata-first.ld'],
    );
    const header = await elfHeader(program);
    const rodata = await section(program, '.rodata');
    // Less than one table entry of padding, then .rodata: the table cannot grow in place.
    const gap = rodata.offset - (header.phoff + header.phnum * 56);
    expect(gap).toBeGreaterThanOrEqual(0);
    expect(gap).toBeLessThan(56);
    expect((await programHeaders(program)).some((r) => r.type === 'NULL')).toBe(false);
    expect(await runOk(arch, program)).toBe(`${message}\n`);
    const original = await readFile(program);
    const rodataBytes = original.subarray(rodata.offset, rodata.offset + rodata.size);

    const result = await runCli(['set-runpath', LONG_RUNPATH, program, '--json'], { timeoutMs: 60_000 });
    if (result.code !== 0) {
      expect(result.code, result.stderr).toBe(3);
      expect((JSON.parse(result.stdout) as { error?: { kind: string } }[])[0]?.error?.kind).toBe('unsupported');
      expect(Buffer.compare(await readFile(program), original)).toBe(0);
      return;
    }
    expect(Buffer.compare((await readFile(program)).subarray(rodata.offset, rodata.offset + rodata.size), rodataBytes)).toBe(0);
    const rows = await programHeaders(program);
    const after = await elfHeader(program);
    // A moved table must be where Linux before 5.18 and qemu-user compute AT_PHDR to be.
    const lowest = loads(rows).reduce((low, l) => (l.vaddr < low.vaddr ? l : low));
    expect(lowest.vaddr - lowest.offset + after.phoff).toBe(one(rows, 'PHDR').vaddr);
    expect(loadProblems(rows)).toEqual([]);
    expect(await dynamicStrings(program, 'RUNPATH')).toEqual([LONG_RUNPATH]);
    expect(await runOk(arch, program)).toBe(`${message}\n`);
  });

  it('#639: DT_INIT keeps its value when .dynamic and .dynstr move, and the -init function and constructors still run', async () => {
    const d = await dir(`${arch}-init`);
    const write = '#include <string.h>\n#include <unistd.h>\nstatic void say(const char *s) { write(1, s, strlen(s)); }\n';
    await compile(
      arch,
      d,
      'libinit.so',
      {
        'lib.c': `${write}void lib_init(void) { say("library DT_INIT ran\\n"); }\n__attribute__((constructor)) static void lib_ctor(void) { say("library constructor ran\\n"); }\nvoid lib_hello(void) { say("library function ran\\n"); }\n`,
      },
      // lld leaves no spare DT_NULL slot: adding a DT_NEEDED moves .dynamic.
      ['-shared', '-fPIC', '-fuse-ld=lld', '-Wl,-init=lib_init', '-Wl,-soname,libinit.so'],
    );
    const program = await compile(
      arch,
      d,
      'prog',
      {
        'prog.c': `${write}void lib_hello(void);\nvoid prog_init(void) { say("program DT_INIT ran\\n"); }\nint main(void) { lib_hello(); return 0; }\n`,
      },
      ['-fPIE', '-pie', '-fuse-ld=lld', '-Wl,-init=prog_init', '-L.', '-linit', '-Wl,-rpath,$ORIGIN'],
    );
    const library = join(d, 'libinit.so');
    const expected = 'library DT_INIT ran\nlibrary constructor ran\nprogram DT_INIT ran\nlibrary function ran\n';
    expect(await runOk(arch, program)).toBe(expected);

    for (const file of [library, program]) {
      const rows = await dynamicRows(file);
      const kept = rows.filter((r) => ['INIT', 'FINI', 'INIT_ARRAY', 'INIT_ARRAYSZ', 'FINI_ARRAY', 'FINI_ARRAYSZ'].includes(r.tag));
      expect(kept.map((r) => r.tag)).toContain('INIT');
      const dynamicBefore = one(await programHeaders(file), 'DYNAMIC');
      const strtabBefore = await dynamicNumber(file, 'STRTAB');

      await cli(['add-needed', 'libm.so.6', file]);
      await cli(['set-runpath', `${LONG_RUNPATH}:$ORIGIN`, file]);

      // Both tables really moved, which is when patchelf rewrote DT_INIT.
      expect(one(await programHeaders(file), 'DYNAMIC').offset).not.toBe(dynamicBefore.offset);
      expect(await dynamicNumber(file, 'STRTAB')).not.toBe(strtabBefore);
      const afterRows = await dynamicRows(file);
      expect(afterRows.filter((r) => kept.some((k) => k.tag === r.tag))).toEqual(kept);
      expect(await dynamicStrings(file, 'NEEDED')).toContain('libm.so.6');
    }
    expect(await runOk(arch, program)).toBe(expected);
  });

  describe('#643: a program header table that does not follow the ELF header', () => {
    const ROOM = 1024;
    const roomSource = `__attribute__((used, aligned(64))) const unsigned char phdr_room[${ROOM}] = { 1 };\n`;

    /** Links with one RX segment from offset 0 (so the room in .rodata is in the first LOAD) and moves the table there. */
    async function relocated(
      d: string,
      name: string,
      spareNullEntries: number,
      sources: Record<string, string>,
      flags: string[],
    ): Promise<string> {
      const file = await compile(arch, d, `${name}.linked`, sources, ['-Wl,-z,noseparate-code', ...flags]);
      const rows = await programHeaders(file);
      const roomOffset = offsetOfAddress(rows, await symbolAddress(file, 'phdr_room'));
      const bytes = relocateProgramHeaders(new Uint8Array(await readFile(file)), {
        roomOffset,
        roomSize: ROOM,
        spareNullEntries,
        occupyOldPlace: true,
      });
      const out = join(d, name);
      await writeFile(out, bytes, { mode: 0o755 });
      const header = await elfHeader(out);
      expect(header.phoff).toBe(roomOffset);
      expect(header.phoff).toBeGreaterThan(64);
      return out;
    }

    const programSource = `#include <stdio.h>\n${roomSource}static const char message[] = "table elsewhere, program fine";\nint main(void) { puts(message); return 0; }\n`;

    it('an executable with a spare PT_NULL: the new segment takes the slot and the table stays where it is', async () => {
      const d = await dir(`${arch}-phoff-exec`);
      const program = await relocated(d, 'prog', 1, { 'prog.c': programSource }, ['-no-pie']);
      // The interpreter path now lives where a table "at the start" would be written.
      const interp = one(await programHeaders(program), 'INTERP');
      expect(interp.offset).toBe(64);
      expect(await runOk(arch, program)).toBe('table elsewhere, program fine\n');
      const header = await elfHeader(program);
      const interpreter = await interpreterOf(program);
      expect(interpreter).toMatch(/^\/lib/);

      expect(await tierOf(['set-runpath', LONG_RUNPATH, program])).toBe('append');

      expect(await elfHeader(program)).toEqual(header);
      expect((await programHeaders(program)).some((r) => r.type === 'NULL')).toBe(false);
      expect(await interpreterOf(program)).toBe(interpreter);
      expect(loadProblems(await programHeaders(program))).toEqual([]);
      expect(await dynamicStrings(program, 'RUNPATH')).toEqual([LONG_RUNPATH]);
      expect(await runOk(arch, program)).toBe('table elsewhere, program fine\n');
    });

    it('an executable without a spare slot: the table moves only to where the kernel and qemu will look for it', async () => {
      const d = await dir(`${arch}-phoff-full`);
      const program = await relocated(d, 'prog', 0, { 'prog.c': programSource }, ['-no-pie']);
      expect(await runOk(arch, program)).toBe('table elsewhere, program fine\n');
      const original = await readFile(program);
      const interpreter = await interpreterOf(program);
      const result = await runCli(['set-runpath', LONG_RUNPATH, program, '--json'], { timeoutMs: 60_000 });
      if (result.code !== 0) {
        // Refusing is allowed (docs/design.md's ELF facts: keep an executable's table where it is, or prove the move);
        // writing anything is not.
        expect(result.code, result.stderr).toBe(3);
        expect((JSON.parse(result.stdout) as { error?: { kind: string } }[])[0]?.error?.kind).toBe('unsupported');
        expect(Buffer.compare(await readFile(program), original)).toBe(0);
        return;
      }
      const rows = await programHeaders(program);
      const header = await elfHeader(program);
      // Linux before 5.18 and qemu-user compute AT_PHDR as (lowest PT_LOAD p_vaddr - p_offset) + e_phoff:
      // that address must hold the table, as PT_PHDR says and as a PT_LOAD maps it.
      const lowest = loads(rows).reduce((low, l) => (l.vaddr < low.vaddr ? l : low));
      const phdr = one(rows, 'PHDR');
      expect(lowest.vaddr - lowest.offset + header.phoff).toBe(phdr.vaddr);
      expect(phdr.offset).toBe(header.phoff);
      const mapping = loads(rows).find((l) => phdr.vaddr >= l.vaddr && phdr.vaddr + phdr.memsz <= l.vaddr + l.filesz);
      expect(mapping, 'a PT_LOAD maps the table from the file').toBeDefined();
      expect(phdr.offset - (mapping?.offset ?? 0)).toBe(phdr.vaddr - (mapping?.vaddr ?? 0));
      expect(rows[0]?.type).toBe('PHDR');
      expect(await interpreterOf(program)).toBe(interpreter);
      expect(loadProblems(rows)).toEqual([]);
      expect(await dynamicStrings(program, 'RUNPATH')).toEqual([LONG_RUNPATH]);
      expect(await runOk(arch, program)).toBe('table elsewhere, program fine\n');
    });

    it('a shared library: loads, and glibc finds every program header of it at run time (dl_iterate_phdr)', async () => {
      const d = await dir(`${arch}-phoff-lib`);
      const library = await relocated(d, 'libroom.so', 0, { 'room.c': `${roomSource}int room_hello(void) { return 42; }\n` }, [
        '-shared',
        '-fPIC',
        '-Wl,-soname,libroom.so',
      ]);
      // The program links against the library as the linker wrote it; it loads the transformed one.
      const program = await compile(
        arch,
        d,
        'prog',
        {
          'prog.c': [
            '#define _GNU_SOURCE',
            '#include <link.h>',
            '#include <stdio.h>',
            '#include <string.h>',
            'int room_hello(void);',
            'static int visit(struct dl_phdr_info *info, size_t size, void *data) {',
            '  (void)size; (void)data;',
            '  if (strstr(info->dlpi_name, "libroom") == NULL) return 0;',
            '  int loads = 0, dynamic = 0;',
            '  for (int i = 0; i < info->dlpi_phnum; i++) {',
            '    if (info->dlpi_phdr[i].p_type == PT_LOAD) loads++;',
            '    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) dynamic++;',
            '  }',
            '  printf("libroom phnum=%d loads=%d dynamic=%d\\n", (int)info->dlpi_phnum, loads, dynamic);',
            '  return 1;',
            '}',
            'int main(void) { printf("room says %d\\n", room_hello()); dl_iterate_phdr(visit, NULL); return 0; }',
            '',
          ].join('\n'),
        },
        [join(d, 'libroom.so.linked'), '-Wl,-rpath,$ORIGIN'],
      );
      const expectLine = async (): Promise<void> => {
        const rows = await programHeaders(library);
        const expected = `room says 42\nlibroom phnum=${rows.length} loads=${loads(rows).length} dynamic=1\n`;
        expect(await runOk(arch, program)).toBe(expected);
      };
      await expectLine();
      const note = one(await programHeaders(library), 'NOTE');
      expect(note.offset).toBe(64);
      const notes = await readelfText(['-n'], library);

      expect(await tierOf(['set-runpath', LONG_RUNPATH, library])).toBe('append');

      expect(loadProblems(await programHeaders(library))).toEqual([]);
      expect(await dynamicStrings(library, 'RUNPATH')).toEqual([LONG_RUNPATH]);
      expect(await readelfText(['-n'], library)).toBe(notes);
      await expectLine();
    });
  });

  it('#664: version definitions and needs stay right when .dynstr and .dynamic move', async () => {
    const sources = {
      'ver.c':
        'int foo_v1(void) { return 1; }\nint foo_v2(void) { return 2; }\nint bar(void) { return 40; }\n__asm__(".symver foo_v1,foo@VERS_1");\n__asm__(".symver foo_v2,foo@@VERS_2");\n',
      'ver.map': 'VERS_1 { global: foo; local: *; };\nVERS_2 { global: foo; bar; } VERS_1;\n',
    };
    const use =
      '#include <stdio.h>\nint foo(void); int bar(void);\n#ifdef OLD\n__asm__(".symver foo,foo@VERS_1");\n#endif\nint main(void) { printf("foo=%d bar=%d\\n", foo(), bar()); return 0; }\n';
    for (const linker of ['bfd', 'lld']) {
      const sub = await dir(`${arch}-versions/${linker}`);
      const library = await compile(arch, sub, 'libver.so.1', sources, [
        '-shared',
        '-fPIC',
        `-fuse-ld=${linker}`,
        '-Wl,-soname,libver.so.1',
        '-Wl,--version-script=ver.map',
      ]);
      await copyFile(library, join(sub, 'libver.so'));
      const flags = ['-L.', '-lver', '-Wl,-rpath,$ORIGIN', `-fuse-ld=${linker}`];
      const current = await compile(arch, sub, 'use-current', { 'use.c': use }, flags);
      const old = await compile(arch, sub, 'use-old', { 'use.c': use }, ['-DOLD', ...flags]);
      // Bind every symbol at start-up, so that a broken version record fails the run, not a later call.
      const env = { LD_BIND_NOW: '1' };
      expect(await runOk(arch, current, { env })).toBe('foo=2 bar=40\n');
      expect(await runOk(arch, old, { env })).toBe('foo=1 bar=40\n');

      const versionsBefore = await readelfText(['-V'], library);
      expect(versionsBefore).toMatch(/Name: VERS_1/);
      expect(versionsBefore).toMatch(/Name: VERS_2/);
      const strtab = await dynamicNumber(library, 'STRTAB');
      const dynamicBefore = one(await programHeaders(library), 'DYNAMIC');
      await cli(['set-runpath', LONG_RUNPATH, library]);
      await cli(['add-needed', 'libm.so.6', library]);
      await cli(['add-needed', 'libdl.so.2', library]);
      await cli(['add-needed', 'librt.so.1', library]);
      expect(await dynamicNumber(library, 'STRTAB')).not.toBe(strtab);
      if (linker === 'lld') expect(one(await programHeaders(library), 'DYNAMIC').offset).not.toBe(dynamicBefore.offset);

      expect(await readelfText(['-V'], library)).toBe(versionsBefore);
      const sections = await sectionRows(library);
      for (const [tag, type] of [
        ['VERDEF', 'VERDEF'],
        ['VERSYM', 'VERSYM'],
      ] as const) {
        const address = sections.find((s) => s.type === type)?.addr;
        expect(address, `${type} section`).toBeDefined();
        expect(await dynamicNumber(library, tag)).toBe(address);
      }
      expect(await runOk(arch, current, { env })).toBe('foo=2 bar=40\n');
      expect(await runOk(arch, old, { env })).toBe('foo=1 bar=40\n');

      // The program side: renaming a needed library renames its version need (vn_file) with it.
      const needsBefore = await readelfText(['-V'], old);
      await copyFile(library, join(sub, 'libver-renamed.so.1'));
      await cli(['replace-needed', 'libver.so.1', 'libver-renamed.so.1', old]);
      await cli(['set-runpath', `${LONG_RUNPATH}:$ORIGIN`, old]);
      const needsAfter = await readelfText(['-V'], old);
      expect(needsAfter).toBe(needsBefore.replace('File: libver.so.1 ', 'File: libver-renamed.so.1 '));
      expect(needsAfter).not.toBe(needsBefore);
      const oldSections = await sectionRows(old);
      expect(await dynamicNumber(old, 'VERNEED')).toBe(oldSections.find((s) => s.type === 'VERNEED')?.addr);
      expect(await dynamicNumber(old, 'VERSYM')).toBe(oldSections.find((s) => s.type === 'VERSYM')?.addr);
      expect(await dynamicStrings(old, 'NEEDED')).toContain('libver-renamed.so.1');
      expect(await runOk(arch, old, { env })).toBe('foo=1 bar=40\n');
    }
  });

  describe('#146: a moved .dynamic stays writable (ld.so writes DT_DEBUG into it)', () => {
    const checker = [
      '#include <link.h>',
      '#include <stdio.h>',
      '#include <sys/auxv.h>',
      'extern ElfW(Dyn) _DYNAMIC[];',
      'int main(void) {',
      '  const ElfW(Phdr) *phdr = (const ElfW(Phdr) *)getauxval(AT_PHDR);',
      '  unsigned long phnum = getauxval(AT_PHNUM);',
      '  ElfW(Addr) base = 0;',
      '  const ElfW(Phdr) *dynamic = NULL;',
      '  for (unsigned long i = 0; i < phnum; i++) {',
      '    if (phdr[i].p_type == PT_PHDR) base = (ElfW(Addr))phdr - phdr[i].p_vaddr;',
      '    if (phdr[i].p_type == PT_DYNAMIC) dynamic = &phdr[i];',
      '  }',
      '  if (dynamic == NULL) { puts("no PT_DYNAMIC"); return 1; }',
      '  ElfW(Dyn) *entry = (ElfW(Dyn) *)(base + dynamic->p_vaddr);',
      '  int debug = -1;',
      '  for (ElfW(Dyn) *d = entry; d->d_tag != DT_NULL; d++) if (d->d_tag == DT_DEBUG) debug = d->d_un.d_ptr != 0;',
      '  printf("dynamic %s, DT_DEBUG %s\\n", entry == _DYNAMIC ? "linked" : "moved", debug < 0 ? "missing" : debug ? "set" : "zero");',
      '  return 0;',
      '}',
      '',
    ].join('\n');

    it.each([
      { name: 'lld PIE', flags: ['-fPIE', '-pie', '-fuse-ld=lld'] },
      { name: 'lld non-PIE executable', flags: ['-no-pie', '-fuse-ld=lld'] },
      { name: 'lld PIE without RELRO', flags: ['-fPIE', '-pie', '-fuse-ld=lld', '-Wl,-z,norelro'] },
    ])('$name', async ({ name, flags }) => {
      const d = await dir(`${arch}-dynamic-${name.replace(/\W+/g, '-')}`);
      const program = await compile(arch, d, 'prog', { 'prog.c': checker }, flags);
      expect(await runOk(arch, program)).toBe('dynamic linked, DT_DEBUG set\n');
      const dynamicBefore = one(await programHeaders(program), 'DYNAMIC');

      await cli(['add-needed', 'libm.so.6', program]);

      const rows = await programHeaders(program);
      const dynamic = one(rows, 'DYNAMIC');
      expect(dynamic.offset).not.toBe(dynamicBefore.offset);
      const holder = loads(rows).find((l) => dynamic.vaddr >= l.vaddr && dynamic.vaddr + dynamic.memsz <= l.vaddr + l.memsz);
      expect(holder, 'a PT_LOAD maps the new PT_DYNAMIC').toBeDefined();
      expect(holder?.flags).toContain('W');
      expect(dynamic.offset - (holder?.offset ?? 0)).toBe(dynamic.vaddr - (holder?.vaddr ?? 0));
      expect(loadProblems(rows)).toEqual([]);
      expect((await dynamicRows(program)).some((r) => r.tag === 'DEBUG')).toBe(true);
      expect(await dynamicStrings(program, 'NEEDED')).toContain('libm.so.6');
      expect(await runOk(arch, program)).toBe('dynamic moved, DT_DEBUG set\n');
    });
  });

  it('#492: every PT_LOAD after an append keeps p_vaddr ≡ p_offset (mod p_align), new ones also modulo the machine page size', async () => {
    const picked = fixtures(
      (f) =>
        f.arch === arch &&
        f.kind !== 'static' &&
        !f.tags.includes('no-sections') &&
        ((f.origin === 'compiled' &&
          ['pie-runpath', 'exec-runpath', 'libuser-runpath', 'pie-runpath-lld', 'libuser-runpath-lld', 'pie-runpath-gold'].some((n) =>
            f.id.endsWith(`/${n}`),
          )) ||
          (f.origin === 'cuda' && (f.id.includes('libcudart') || f.id.includes('libnvtoolsext')))),
    );
    // Both link-time page sizes of aarch64 and the 2 MiB-aligned CUDA libraries must be among them.
    const pageSizes = new Set(picked.map((f) => f.pageSize));
    expect(pageSizes.size).toBeGreaterThanOrEqual(2);
    expect(picked.length).toBeGreaterThanOrEqual(arch === 'x86_64' ? 7 : 12);
    const d = await dir(`${arch}-congruence`);
    for (const [i, f] of picked.entries()) {
      const copy = join(d, `${i}-${basename(f.path)}`);
      await copyFile(f.path, copy);
      // The copy no longer sits next to its dependencies: the loader is pointed at them.
      const libraryPath = f.libraryPath ?? (f.kind === 'shared' ? dirname(f.path) : join(dirname(f.path), '..', 'lib'));
      const before = loads(await programHeaders(copy));
      await cli(['set-runpath', `${LONG_RUNPATH}:${libraryPath}`, copy]);
      // A needed entry added and removed again: on lld and gold outputs this moves .dynamic too.
      await cli(['add-needed', 'libcuda-patchelf-probe.so', copy]);
      await cli(['remove-needed', 'libcuda-patchelf-probe.so', copy]);
      const rows = await programHeaders(copy);
      expect(loadProblems(rows), f.id).toEqual([]);
      const added = loads(rows).filter((l) => !before.some((b) => b.offset === l.offset && b.vaddr === l.vaddr));
      expect(added.length, f.id).toBeLessThanOrEqual(1);
      for (const load of added)
        expect(load.vaddr % machinePageSizeOf(arch), `${f.id}: new LOAD`).toBe(load.offset % machinePageSizeOf(arch));
      if (f.kind === 'shared') {
        const listed = await listDependencies(copy, arch, libraryPath);
        expect(listed.code, `${f.id}\n${describeRun(listed)}`).toBe(0);
        expect(listed.stdout).not.toMatch(/not found/);
      } else {
        expect(await runOk(arch, copy, { libraryPath })).toBe(`${f.expectedOutput ?? ''}\n`);
      }
    }
  });

  describe('repeated updates (patchelf repeated-updates): 100 edits keep the segment count and the growth bounded', () => {
    /** 100 runpaths that grow, shrink and change, none equal to the previous. */
    const runpaths = Array.from({ length: 100 }, (_, i) => {
      const count = 1 + ((i * 7) % 5);
      return Array.from({ length: count }, (_, k) => `/nix/store/${String(i * 31 + k).padStart(32, 'x')}-dep-${i}-${k}/lib`)
        .concat('$ORIGIN/../lib')
        .join(':');
    });

    const cases = (): Fixture[] =>
      fixtures(
        (f) =>
          f.arch === arch &&
          f.origin === 'compiled' &&
          f.runnable &&
          (f.id.endsWith('/pie-runpath') || f.id.endsWith('/pie-runpath-lld') || (arch === 'x86_64' && f.id.endsWith('/exec-runpath'))) &&
          (arch === 'x86_64' || f.pageSize === 65536),
      );

    it('picks the inputs', () => {
      expect(cases().length).toBeGreaterThanOrEqual(2);
    });

    it.each(cases().map((f) => ({ id: f.id, f })))('$id', async ({ f }) => {
      const d = await dir(`${arch}-repeated-${f.id.replace(/\W+/g, '-')}`);
      const binDir = join(d, 'bin');
      await mkdir(binDir, { recursive: true });
      await cp(join(f.path, '..', '..', 'lib'), join(d, 'lib'), { recursive: true });
      const program = join(binDir, 'prog');
      await copyFile(f.path, program);
      const originalSize = (await readFile(program)).length;
      const loadsBefore = loads(await programHeaders(program)).length;
      const dynstr = await dynamicNumber(program, 'STRSZ');
      const dynamicSize = one(await programHeaders(program), 'DYNAMIC').filesz;

      for (const value of runpaths) await editElfFile(program, (editor) => editor.setRunpath(value, 'keep'));

      const rows = await programHeaders(program);
      expect(loads(rows).length).toBeLessThanOrEqual(loadsBefore + 1);
      expect(loadProblems(rows)).toEqual([]);
      // The growth must not scale with the number of edits: one copy of each table, room for a few of the
      // longest values, a page of alignment. A copy of .dynstr, or page padding, per edit exceeds it.
      const longest = Math.max(...runpaths.map((value) => value.length + 1));
      const growth = (await readFile(program)).length - originalSize;
      expect(growth).toBeLessThanOrEqual((dynstr ?? 0) + dynamicSize + 8 * longest + machinePageSizeOf(arch));
      expect(await dynamicStrings(program, 'RUNPATH')).toEqual([runpaths[runpaths.length - 1]]);
      expect(await runOk(arch, program)).toBe(`${f.expectedOutput ?? ''}\n`);
    });
  });

  it('lld output without spare DT_NULL slots: a new DT_NEEDED moves .dynamic, and the new library is really loaded', async () => {
    const d = await dir(`${arch}-lld-needed`);
    await compile(
      arch,
      d,
      'libextra.so',
      { 'extra.c': '#include <unistd.h>\n__attribute__((constructor)) static void hello(void) { write(1, "libextra loaded\\n", 16); }\n' },
      ['-shared', '-fPIC', '-Wl,-soname,libextra.so'],
    );
    const library = await compile(arch, d, 'libgreet2.so', { 'greet.c': 'const char *greet2(void) { return "greet2 called"; }\n' }, [
      '-shared',
      '-fPIC',
      '-fuse-ld=lld',
      '-Wl,-soname,libgreet2.so',
    ]);
    const program = await compile(
      arch,
      d,
      'prog',
      { 'prog.c': '#include <stdio.h>\nconst char *greet2(void);\nint main(void) { puts(greet2()); return 0; }\n' },
      ['-fPIE', '-pie', '-fuse-ld=lld', '-L.', '-lgreet2', '-Wl,-rpath,$ORIGIN'],
    );
    expect(await runOk(arch, program)).toBe('greet2 called\n');
    const summary = JSON.parse((await cli(['print', '--json', program, library])).stdout) as { spareDynamicSlots: number | null }[];
    expect(summary.map((s) => s.spareDynamicSlots)).toEqual([0, 0]);

    for (const file of [program, library]) {
      const before = await programHeaders(file);
      expect(await tierOf(['add-needed', 'libextra.so', file])).toBe('append');
      const after = await programHeaders(file);
      expect(one(after, 'DYNAMIC').offset).not.toBe(one(before, 'DYNAMIC').offset);
      expect(loads(after).length).toBe(loads(before).length + 1);
      expect(loadProblems(after)).toEqual([]);
      expect((await dynamicStrings(file, 'NEEDED'))[0]).toBe('libextra.so');
      // The moved array has room to spare: a second new library costs no further segment.
      await cli(['add-needed', 'libm.so.6', file]);
      expect(loads(await programHeaders(file)).length).toBe(loads(before).length + 1);
    }
    // Once from the program's own DT_NEEDED, and the library's is satisfied by the same object.
    expect(await runOk(arch, program)).toBe('libextra loaded\ngreet2 called\n');
    const list = await listDependencies(library, arch, d);
    expect(list.code, describeRun(list)).toBe(0);
    expect(list.stdout).toMatch(/libextra\.so => /);
  });
});
