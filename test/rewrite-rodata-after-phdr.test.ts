// patchelf #244/#531: growing the program header table in place over .interp and the notes that follow
// it, patchelf overwrote the .rodata linked right after them. Two layouts, with a long runpath that makes
// the table grow: .rodata linked straight after the notes, with no page of slack, where the table grows
// over the interpreter and notes it moves away and .rodata stays intact; and .rodata right after the
// table, less than one entry away, so that the table cannot grow where it is: its bytes are never
// overwritten, and the table moves to where the loaders will look for it, or the edit is refused with
// the file left as it was.

import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { BUILD_ARCHES } from './helpers/arch.js';
import { elfHeader, loadSegments, programHeaders, section, sectionRows } from './helpers/readelf.js';
import {
  LONG_RUNPATH,
  expectLongRunpathAndRun,
  expectTableWhereLoadersLook,
  programWithRodataMoved,
  runOk,
  setLongRunpathOrRefuse,
  tierOf,
  useRegressionDirs,
} from './helpers/rewrite-regression.js';

const dir = useRegressionDirs('rw-rodata-after-phdr');

describe.each(BUILD_ARCHES)('%s', (arch) => {
  it('#244/#531: growing the program header table over .interp and notes leaves .rodata that follows them intact', async () => {
    const d = await dir(`${arch}-rodata`);
    // .rodata goes right after the notes in the first LOAD: the bytes that follow the table are the
    // interpreter, the notes, then the program's string constants, with no page of slack in between.
    const message = 'rodata intact: the quick brown fox jumps over the lazy dog 0123456789';
    const program = await programWithRodataMoved(arch, d, {
      script: 'rodata.ld',
      placement: {
        anchor: /^\s*\.note\.gnu\.build-id\s*:/,
        after: true,
        sections: ['  .note.gnu.property : { *(.note.gnu.property) }', '  .note.ABI-tag : { *(.note.ABI-tag) }'],
      },
      message,
      flags: ['-no-pie'],
      linkFlags: ['-Wl,--build-id=sha1'],
    });

    const header = await elfHeader(program);
    const rodata = await section(program, '.rodata');
    const before = await programHeaders(program);
    const tableEnd = header.phoff + header.phnum * 56;
    const between = (await sectionRows(program)).filter((s) => s.offset >= tableEnd && s.offset < rodata.offset).map((s) => s.name);
    // The input must be the layout the bug needs; otherwise this test would prove nothing.
    expect(before.some((r) => r.type === 'NULL')).toBe(false);
    expect(between.every((name) => name === '.interp' || name.startsWith('.note'))).toBe(true);
    expect(rodata.offset - tableEnd).toBeLessThan(0x100);
    expect(loadSegments(before)[0]?.offset).toBe(0);
    expect(rodata.offset + rodata.size).toBeLessThanOrEqual(loadSegments(before)[0]?.filesz ?? 0);
    expect(await runOk(arch, program)).toBe(`${message}\n`);
    const rodataBytes = (await readFile(program)).subarray(rodata.offset, rodata.offset + rodata.size);

    expect(await tierOf(['set-runpath', LONG_RUNPATH, program])).toBe('append');

    const after = await elfHeader(program);
    // The table grew where it is, over the interpreter and notes it moved away.
    expect(after.phoff).toBe(header.phoff);
    expect(after.phnum).toBe(header.phnum + 1);
    expect(Buffer.compare((await readFile(program)).subarray(rodata.offset, rodata.offset + rodata.size), rodataBytes)).toBe(0);
    expect(await section(program, '.rodata')).toEqual(rodata);
    await expectLongRunpathAndRun(arch, program, `${message}\n`);
  });

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
