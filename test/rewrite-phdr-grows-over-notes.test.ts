// patchelf #244/#531: growing the program header table in place over .interp and the notes that follow
// it, patchelf overwrote the .rodata linked right after them. Here .rodata is linked straight after the
// notes, with no page of slack, and a long runpath makes the table grow.

import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { BUILD_ARCHES } from './helpers/arch.js';
import { elfHeader, loadSegments, programHeaders, section, sectionRows } from './helpers/readelf.js';
import {
  LONG_RUNPATH,
  expectLongRunpathAndRun,
  programWithRodataMoved,
  runOk,
  tierOf,
  useRegressionDirs,
} from './helpers/rewrite-regression.js';

const dir = useRegressionDirs('rw-phdr-grows-over-notes');

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
});
