// patchelf #664: symbol versions broke when .dynstr and .dynamic moved. A versioned library (two
// versions of foo, linked by ld.bfd and by lld) and programs bound to either version: the definitions,
// the needs and the DT_VER* entries stay right, and renaming a needed library renames its version need.

import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUILD_ARCHES } from './helpers/arch.js';
import { dynamicNumber, dynamicStrings, programHeaders, readelfText, sectionRows, segmentOfType } from './helpers/readelf.js';
import { LONG_RUNPATH, cliOk, runOk, useRegressionDirs } from './helpers/rewrite-regression.js';
import { compile } from './helpers/rw-build.js';

const dir = useRegressionDirs('rw-symbol-versions');

describe.each(BUILD_ARCHES)('%s', (arch) => {
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
      const dynamicBefore = segmentOfType(await programHeaders(library), 'DYNAMIC');
      await cliOk(['set-runpath', LONG_RUNPATH, library]);
      await cliOk(['add-needed', 'libm.so.6', library]);
      await cliOk(['add-needed', 'libdl.so.2', library]);
      await cliOk(['add-needed', 'librt.so.1', library]);
      expect(await dynamicNumber(library, 'STRTAB')).not.toBe(strtab);
      if (linker === 'lld') expect(segmentOfType(await programHeaders(library), 'DYNAMIC').offset).not.toBe(dynamicBefore.offset);

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
      await cliOk(['replace-needed', 'libver.so.1', 'libver-renamed.so.1', old]);
      await cliOk(['set-runpath', `${LONG_RUNPATH}:$ORIGIN`, old]);
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
});
