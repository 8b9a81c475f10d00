// The loaders the emulation reads: a loader that is not there is an io error naming the file on this
// machine, as the text its path's bytes spell (a path of the emulated system is a byte string).

import { describe, expect, it } from 'vitest';
import { EM } from '../../src/elf/constants.js';
import { LoaderRegistry } from '../../src/loader/emulated-loader.js';
import { machineAbi } from '../../src/loader/machine-abi.js';
import { ObjectFactsCache } from '../../src/loader/object-facts.js';
import { SystemRoot } from '../../src/loader/system-root.js';
import { bytes } from '../helpers/byte-strings.js';

const X86_64 = machineAbi(EM.EM_X86_64, 64);
const LOADER = '/nonexistent-cuda-patchelf-test/é/ld-linux-x86-64.so.2';

const registryIn = (root: SystemRoot): LoaderRegistry =>
  new LoaderRegistry({ root, ldLibraryPath: null, hostAbi: X86_64, cpuInfo: null }, new ObjectFactsCache());

describe('a loader that is not there', () => {
  it('names the file as text, on this machine', async () => {
    if (X86_64 === null) throw new Error('no x86_64 ABI');
    const registry = registryIn(new SystemRoot('/', bytes('/')));
    await expect(registry.loaderAt(bytes(LOADER), X86_64, true)).rejects.toMatchObject({ kind: 'io', file: LOADER });
  });

  it('names the file as text, in a system root', async () => {
    if (X86_64 === null) throw new Error('no x86_64 ABI');
    const registry = registryIn(new SystemRoot('/nonexistent-root-é', bytes('/')));
    await expect(registry.loaderAt(bytes(LOADER), X86_64, true)).rejects.toMatchObject({
      kind: 'io',
      file: `/nonexistent-root-é${LOADER}`,
    });
  });
});
