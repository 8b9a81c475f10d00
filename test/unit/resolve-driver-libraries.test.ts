// The driver library list: which hook provides each name, and the table of docs/auto-patchelf.md,
// which must list the same names with the same cuda_compat column.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { DRIVER_LIBRARIES, driverLibraryHook } from '../../src/resolve/driver-libraries.js';
import { bytes } from '../helpers/byte-strings.js';

const DOC = readFileSync(new URL('../../docs/auto-patchelf.md', import.meta.url), 'utf8');

describe('driver libraries', () => {
  it("are the driver hook's, or cuda-compat's for what cuda_compat holds when that hook is on", () => {
    const hooks = (driver: boolean, cudaCompat: boolean): (string | null)[] =>
      ['libcuda.so.1', 'libnvidia-ml.so.1', 'libz.so.1'].map((name) => driverLibraryHook(bytes(name), { driver, cudaCompat }));
    expect(hooks(true, false)).toEqual(['driver', 'driver', null]);
    expect(hooks(true, true)).toEqual(['cuda-compat', 'driver', null]);
    expect(hooks(false, true)).toEqual(['cuda-compat', null, null]);
    expect(hooks(false, false)).toEqual([null, null, null]);
  });

  it('hold the names programs load (a versioned soname or a bare Jetson name), each once, each with its reason', () => {
    const names = DRIVER_LIBRARIES.map((library) => library.name);
    expect(new Set(names).size).toBe(names.length);
    for (const library of DRIVER_LIBRARIES) {
      expect(library.name).toMatch(/^lib[\w-]+\.so(\.\d+)?$/);
      expect(library.why).not.toBe('');
    }
    // The libraries of cuda-compat's compat/ directory.
    expect(DRIVER_LIBRARIES.filter((library) => library.inCudaCompat).map((library) => library.name)).toEqual([
      'libcuda.so.1',
      'libcuda.so',
      'libcudadebugger.so.1',
      'libnvidia-ptxjitcompiler.so.1',
      'libnvidia-nvvm.so.4',
    ]);
  });

  it('are the table of docs/auto-patchelf.md, in its order', () => {
    const section = DOC.slice(DOC.indexOf('## Driver libraries'), DOC.indexOf('## Differences'));
    const rows = [...section.matchAll(/^\| `([^`]+)` +\| (yes)? +\|/gm)].map((row) => [row[1], row[2] === 'yes']);
    expect(rows).toEqual(DRIVER_LIBRARIES.map((library) => [library.name, library.inCudaCompat]));
  });
});
