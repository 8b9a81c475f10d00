// patchelf #492: a PT_LOAD appended with p_vaddr ≢ p_offset (mod p_align) does not load. Compiled inputs
// of every linker and both aarch64 link-time page sizes, and the 2 MiB-aligned CUDA libraries, get a
// long runpath and a DT_NEEDED added and removed; their PT_LOADs stay congruent and they still load.

import { copyFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BUILD_ARCHES, machinePageSizeOf } from './helpers/arch.js';
import { fixtures, listDependencies } from './helpers/fixtures.js';
import { loadSegments, programHeaders } from './helpers/readelf.js';
import { LONG_RUNPATH, cliOk, runOk, useRegressionDirs } from './helpers/rewrite-regression.js';
import { describeRun, loadProblems } from './helpers/rw-build.js';

const dir = useRegressionDirs('rw-load-congruence');

describe.each(BUILD_ARCHES)('%s', (arch) => {
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
      const before = loadSegments(await programHeaders(copy));
      await cliOk(['set-runpath', `${LONG_RUNPATH}:${libraryPath}`, copy]);
      // A needed entry added and removed again: on lld and gold outputs this moves .dynamic too.
      await cliOk(['add-needed', 'libcuda-patchelf-probe.so', copy]);
      await cliOk(['remove-needed', 'libcuda-patchelf-probe.so', copy]);
      const rows = await programHeaders(copy);
      expect(loadProblems(rows), f.id).toEqual([]);
      const added = loadSegments(rows).filter((l) => !before.some((b) => b.offset === l.offset && b.vaddr === l.vaddr));
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
});
