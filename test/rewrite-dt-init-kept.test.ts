// patchelf #639: when .dynamic and .dynstr moved, patchelf rewrote DT_INIT, and the -init function no
// longer ran. A library and a program, both linked by lld with -init (no spare DT_NULL slot, so a new
// DT_NEEDED moves .dynamic), keep every init and fini entry, and all their initialisers still run.

import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUILD_ARCHES } from './helpers/arch.js';
import { dynamicNumber, dynamicRows, dynamicStrings, programHeaders, segmentOfType } from './helpers/readelf.js';
import { LONG_RUNPATH, cliOk, runOk, useRegressionDirs } from './helpers/rewrite-regression.js';
import { compile } from './helpers/rw-build.js';

const dir = useRegressionDirs('rw-dt-init-kept');

describe.each(BUILD_ARCHES)('%s', (arch) => {
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
      const dynamicBefore = segmentOfType(await programHeaders(file), 'DYNAMIC');
      const strtabBefore = await dynamicNumber(file, 'STRTAB');

      await cliOk(['add-needed', 'libm.so.6', file]);
      await cliOk(['set-runpath', `${LONG_RUNPATH}:$ORIGIN`, file]);

      // Both tables really moved, which is when patchelf rewrote DT_INIT.
      expect(segmentOfType(await programHeaders(file), 'DYNAMIC').offset).not.toBe(dynamicBefore.offset);
      expect(await dynamicNumber(file, 'STRTAB')).not.toBe(strtabBefore);
      const afterRows = await dynamicRows(file);
      expect(afterRows.filter((r) => kept.some((k) => k.tag === r.tag))).toEqual(kept);
      expect(await dynamicStrings(file, 'NEEDED')).toContain('libm.so.6');
    }
    expect(await runOk(arch, program)).toBe(expected);
  });
});
