// patchelf #244/#531, the harder layout: .rodata linked right after the program header table, less than
// one entry away, so that the table cannot grow where it is. Its bytes are never overwritten: the table
// moves to where the loaders will look for it, or the edit is refused with the file left as it was.

import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { BUILD_ARCHES } from './helpers/arch.js';
import { elfHeader, programHeaders, section } from './helpers/readelf.js';
import {
  expectLongRunpathAndRun,
  expectTableWhereLoadersLook,
  programWithRodataMoved,
  runOk,
  setLongRunpathOrRefuse,
  useRegressionDirs,
} from './helpers/rewrite-regression.js';

const dir = useRegressionDirs('rw-rodata-after-phdr');

describe.each(BUILD_ARCHES)('%s', (arch) => {
  it('#244/#531: .rodata right after the program header table is never overwritten; the table moves where the loader finds it, or the edit is refused', async () => {
    const d = await dir(`${arch}-rodata-first`);
    const message = 'rodata right after the headers: 0123456789 abcdefghijklmnopqrstuvwxyz';
    const program = await programWithRodataMoved(arch, d, {
      script: 'rodata-first.ld',
      placement: { anchor: /^\s*\.interp\s*:/, after: false, sections: [] },
      message,
      flags: ['-no-pie'],
      linkFlags: [],
    });
    const header = await elfHeader(program);
    const rodata = await section(program, '.rodata');
    // Less than one table entry of padding, then .rodata: the table cannot grow in place.
    const gap = rodata.offset - (header.phoff + header.phnum * 56);
    expect(gap).toBeGreaterThanOrEqual(0);
    expect(gap).toBeLessThan(56);
    expect((await programHeaders(program)).some((r) => r.type === 'NULL')).toBe(false);
    expect(await runOk(arch, program)).toBe(`${message}\n`);
    const rodataBytes = (await readFile(program)).subarray(rodata.offset, rodata.offset + rodata.size);

    if ((await setLongRunpathOrRefuse(program)) === 'refused') return;
    expect(Buffer.compare((await readFile(program)).subarray(rodata.offset, rodata.offset + rodata.size), rodataBytes)).toBe(0);
    // A moved table must be where Linux before 5.18 and qemu-user compute AT_PHDR to be.
    expectTableWhereLoadersLook(await programHeaders(program), (await elfHeader(program)).phoff);
    await expectLongRunpathAndRun(arch, program, `${message}\n`);
  });
});
