// patchelf #643: a program header table that does not follow the ELF header. Inputs are linked, then
// their table is moved into a room in .rodata and its old place taken by live data (the interpreter
// path now lies where a table "at the start" would be written): an executable with a spare PT_NULL, one
// without, and a shared library whose headers glibc must still find at run time.

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUILD_ARCHES } from './helpers/arch.js';
import { dynamicStrings, elfHeader, interpreterOf, loadSegments, programHeaders, readelfText, segmentOfType } from './helpers/readelf.js';
import {
  LONG_RUNPATH,
  expectLongRunpathAndRun,
  expectTableWhereLoadersLook,
  runOk,
  setLongRunpathOrRefuse,
  tierOf,
  useRegressionDirs,
} from './helpers/rewrite-regression.js';
import { PHDR_ROOM_SOURCE, compile, loadProblems, tableMovedIntoRoom } from './helpers/rw-build.js';

const dir = useRegressionDirs('rw-phdr-moved-into-rodata');

const programSource = `#include <stdio.h>\n${PHDR_ROOM_SOURCE}static const char message[] = "table elsewhere, program fine";\nint main(void) { puts(message); return 0; }\n`;

describe.each(BUILD_ARCHES)('%s', (arch) => {
  describe('#643: a program header table that does not follow the ELF header', () => {
    /** DIR/NAME: `sources` linked (as DIR/NAME.linked) and their table moved into the room in .rodata. */
    async function relocated(
      d: string,
      name: string,
      spareNullEntries: number,
      sources: Record<string, string>,
      flags: string[],
    ): Promise<string> {
      const { bytes, roomOffset } = await tableMovedIntoRoom(arch, d, `${name}.linked`, sources, flags, spareNullEntries);
      const out = join(d, name);
      await writeFile(out, bytes, { mode: 0o755 });
      const header = await elfHeader(out);
      expect(header.phoff).toBe(roomOffset);
      expect(header.phoff).toBeGreaterThan(64);
      return out;
    }

    it('an executable with a spare PT_NULL: the new segment takes the slot and the table stays where it is', async () => {
      const d = await dir(`${arch}-phoff-exec`);
      const program = await relocated(d, 'prog', 1, { 'prog.c': programSource }, ['-no-pie']);
      // The interpreter path now lives where a table "at the start" would be written.
      const interp = segmentOfType(await programHeaders(program), 'INTERP');
      expect(interp.offset).toBe(64);
      expect(await runOk(arch, program)).toBe('table elsewhere, program fine\n');
      const header = await elfHeader(program);
      const interpreter = await interpreterOf(program);
      expect(interpreter).toMatch(/^\/lib/);

      expect(await tierOf(['set-runpath', LONG_RUNPATH, program])).toBe('append');

      expect(await elfHeader(program)).toEqual(header);
      expect((await programHeaders(program)).some((r) => r.type === 'NULL')).toBe(false);
      expect(await interpreterOf(program)).toBe(interpreter);
      await expectLongRunpathAndRun(arch, program, 'table elsewhere, program fine\n');
    });

    it('an executable without a spare slot: the table moves only to where the kernel and qemu will look for it', async () => {
      const d = await dir(`${arch}-phoff-full`);
      const program = await relocated(d, 'prog', 0, { 'prog.c': programSource }, ['-no-pie']);
      expect(await runOk(arch, program)).toBe('table elsewhere, program fine\n');
      const interpreter = await interpreterOf(program);
      if ((await setLongRunpathOrRefuse(program)) === 'refused') return;
      const rows = await programHeaders(program);
      const header = await elfHeader(program);
      // The address the loaders compute must hold the table, as PT_PHDR says and as a PT_LOAD maps it.
      expectTableWhereLoadersLook(rows, header.phoff);
      const phdr = segmentOfType(rows, 'PHDR');
      expect(phdr.offset).toBe(header.phoff);
      const mapping = loadSegments(rows).find((l) => phdr.vaddr >= l.vaddr && phdr.vaddr + phdr.memsz <= l.vaddr + l.filesz);
      expect(mapping, 'a PT_LOAD maps the table from the file').toBeDefined();
      expect(phdr.offset - (mapping?.offset ?? 0)).toBe(phdr.vaddr - (mapping?.vaddr ?? 0));
      expect(rows[0]?.type).toBe('PHDR');
      expect(await interpreterOf(program)).toBe(interpreter);
      await expectLongRunpathAndRun(arch, program, 'table elsewhere, program fine\n');
    });

    it('a shared library: loads, and glibc finds every program header of it at run time (dl_iterate_phdr)', async () => {
      const d = await dir(`${arch}-phoff-lib`);
      const library = await relocated(d, 'libroom.so', 0, { 'room.c': `${PHDR_ROOM_SOURCE}int room_hello(void) { return 42; }\n` }, [
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
        const expected = `room says 42\nlibroom phnum=${rows.length} loads=${loadSegments(rows).length} dynamic=1\n`;
        expect(await runOk(arch, program)).toBe(expected);
      };
      await expectLine();
      const note = segmentOfType(await programHeaders(library), 'NOTE');
      expect(note.offset).toBe(64);
      const notes = await readelfText(['-n'], library);

      expect(await tierOf(['set-runpath', LONG_RUNPATH, library])).toBe('append');

      expect(loadProblems(await programHeaders(library))).toEqual([]);
      expect(await dynamicStrings(library, 'RUNPATH')).toEqual([LONG_RUNPATH]);
      expect(await readelfText(['-n'], library)).toBe(notes);
      await expectLine();
    });
  });
});
