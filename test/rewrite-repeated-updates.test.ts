// patchelf's repeated-updates test: 100 runpath edits of one program, growing, shrinking and changing,
// must keep the number of segments and the growth of the file bounded (one copy of each table, not one
// per edit), and leave a program that runs.

import { copyFile, cp, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { editElfFile } from '../src/edit/edit-file.js';
import { BUILD_ARCHES, machinePageSizeOf } from './helpers/arch.js';
import { fixtures, type Fixture } from './helpers/fixtures.js';
import { dynamicNumber, dynamicStrings, loadSegments, programHeaders, segmentOfType } from './helpers/readelf.js';
import { runOk, useRegressionDirs } from './helpers/rewrite-regression.js';
import { loadProblems } from './helpers/rw-build.js';
import { bytes } from './helpers/byte-strings.js';

const dir = useRegressionDirs('rw-repeated-updates');

/** 100 runpaths that grow, shrink and change, none equal to the previous. */
const runpaths = Array.from({ length: 100 }, (_, i) => {
  const count = 1 + ((i * 7) % 5);
  return Array.from({ length: count }, (_, k) => `/nix/store/${String(i * 31 + k).padStart(32, 'x')}-dep-${i}-${k}/lib`)
    .concat('$ORIGIN/../lib')
    .join(':');
});

describe.each(BUILD_ARCHES)('%s', (arch) => {
  describe('repeated updates (patchelf repeated-updates): 100 edits keep the segment count and the growth bounded', () => {
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
      const loadsBefore = loadSegments(await programHeaders(program)).length;
      const dynstr = await dynamicNumber(program, 'STRSZ');
      const dynamicSize = segmentOfType(await programHeaders(program), 'DYNAMIC').filesz;

      for (const value of runpaths) await editElfFile(program, (editor) => editor.setRunpath(bytes(value), 'keep'));

      const rows = await programHeaders(program);
      expect(loadSegments(rows).length).toBeLessThanOrEqual(loadsBefore + 1);
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
});
