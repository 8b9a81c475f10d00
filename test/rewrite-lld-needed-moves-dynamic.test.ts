// lld leaves no spare DT_NULL slot in .dynamic: a new DT_NEEDED must move the array into a new segment,
// once (a second new library fits the room the move left), and the new library must really be loaded,
// by the program and by a library that needs it.

import { describe, expect, it } from 'vitest';
import { BUILD_ARCHES } from './helpers/arch.js';
import { listDependencies } from './helpers/fixtures.js';
import { dynamicStrings, loadSegments, programHeaders, segmentOfType } from './helpers/readelf.js';
import { cliOk, runOk, tierOf, useRegressionDirs } from './helpers/rewrite-regression.js';
import { compile, describeRun, loadProblems } from './helpers/rw-build.js';

const dir = useRegressionDirs('rw-lld-needed-moves-dynamic');

describe.each(BUILD_ARCHES)('%s', (arch) => {
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
    const summary = JSON.parse((await cliOk(['print', '--json', program, library])).stdout) as { spareDynamicSlots: number | null }[];
    expect(summary.map((s) => s.spareDynamicSlots)).toEqual([0, 0]);

    for (const file of [program, library]) {
      const before = await programHeaders(file);
      expect(await tierOf(['add-needed', 'libextra.so', file])).toBe('append');
      const after = await programHeaders(file);
      expect(segmentOfType(after, 'DYNAMIC').offset).not.toBe(segmentOfType(before, 'DYNAMIC').offset);
      expect(loadSegments(after).length).toBe(loadSegments(before).length + 1);
      expect(loadProblems(after)).toEqual([]);
      expect((await dynamicStrings(file, 'NEEDED'))[0]).toBe('libextra.so');
      // The moved array has room to spare: a second new library costs no further segment.
      await cliOk(['add-needed', 'libm.so.6', file]);
      expect(loadSegments(await programHeaders(file)).length).toBe(loadSegments(before).length + 1);
    }
    // Once from the program's own DT_NEEDED, and the library's is satisfied by the same object.
    expect(await runOk(arch, program)).toBe('libextra loaded\ngreet2 called\n');
    const list = await listDependencies(library, arch, d);
    expect(list.code, describeRun(list)).toBe(0);
    expect(list.stdout).toMatch(/libextra\.so => /);
  });
});
