// `ld.so --help` as glibc's loaders print it, read into the subdirectories doctor searches: the texts
// are those of real loaders (Debian 12's glibc 2.36 on an AMD EPYC without AVX-512, the same release's
// aarch64 loader under qemu, Ubuntu 24.04's glibc 2.39 on an Intel Xeon with AVX-512), from the line
// the search path starts at.

import { describe, expect, it } from 'vitest';
import { cpuModel, cpuModelOfLoader, legacySubdirectories } from '../../src/loader/cpu-model.js';
import { type LoaderCpuView, parseLoaderHelp } from '../../src/loader/loader-help.js';
import { hostAbi } from '../../src/loader/machine-abi.js';
import { latin1 } from '../helpers/byte-strings.js';

/** The first section, the same in the three: the search path of a Debian or Ubuntu system of `triplet`. */
const searchPath = (triplet: string): string => `Shared library search path:
  (libraries located via /etc/ld.so.cache)
  /lib/${triplet} (system search path)
  /usr/lib/${triplet} (system search path)
  /lib (system search path)
  /usr/lib (system search path)
`;

const DEBIAN_12_EPYC = `${searchPath('x86_64-linux-gnu')}
Subdirectories of glibc-hwcaps directories, in priority order:
  x86-64-v4
  x86-64-v3 (supported, searched)
  x86-64-v2 (supported, searched)

Legacy HWCAP subdirectories under library search path directories:
  x86_64 (AT_PLATFORM; supported, searched)
  tls (supported, searched)
  avx512_1
  x86_64 (supported, searched)
`;

const DEBIAN_12_AARCH64 = `${searchPath('aarch64-linux-gnu')}
No subdirectories of glibc-hwcaps directories are searched.

Legacy HWCAP subdirectories under library search path directories:
  aarch64 (AT_PLATFORM; supported, searched)
  tls (supported, searched)
  atomics (supported, searched)
`;

const UBUNTU_24_04_XEON = `${searchPath('x86_64-linux-gnu')}
Subdirectories of glibc-hwcaps directories, in priority order:
  x86-64-v4 (supported, searched)
  x86-64-v3 (supported, searched)
  x86-64-v2 (supported, searched)
`;

const x86 = hostAbi('x64');
const arm = hostAbi('arm64');
if (x86 === null || arm === null) throw new Error('no ABI');

/** What parseLoaderHelp reads in a text it must understand. */
function viewOf(text: string): LoaderCpuView {
  const view = parseLoaderHelp(latin1(text));
  if (view === null) throw new Error('no view');
  return view;
}

describe('parseLoaderHelp', () => {
  it('glibc 2.36 on x86-64: the glibc-hwcaps subdirectories with their marks, the platform and the searched hwcaps', () => {
    expect(parseLoaderHelp(latin1(DEBIAN_12_EPYC))).toEqual({
      glibcHwcaps: [
        { name: 'x86-64-v4', supported: false, searched: false },
        { name: 'x86-64-v3', supported: true, searched: true },
        { name: 'x86-64-v2', supported: true, searched: true },
      ],
      legacy: { platform: 'x86_64', searchedHwcaps: ['x86_64'] },
    });
  });

  it('aarch64 before glibc-hwcaps subdirectories existed there: none, and the legacy names', () => {
    expect(parseLoaderHelp(latin1(DEBIAN_12_AARCH64))).toEqual({
      glibcHwcaps: [],
      legacy: { platform: 'aarch64', searchedHwcaps: ['atomics'] },
    });
  });

  it('glibc 2.37 and later list no legacy subdirectories', () => {
    expect(parseLoaderHelp(latin1(UBUNTU_24_04_XEON))?.legacy).toBeNull();
  });

  it('a loader that lists no glibc-hwcaps section (before 2.33) tells nothing', () => {
    expect(parseLoaderHelp(latin1(DEBIAN_12_EPYC.replace(/\nSubdirectories of glibc-hwcaps[\s\S]*$/, '\n')))).toBeNull();
  });
});

describe('cpuModelOfLoader', () => {
  // The table with a /proc/cpuinfo that lists none of the x86-64-v2 flags: the loader's list wins.
  const baseline = cpuModel(x86, true, { vendor: 'AuthenticAMD', flags: new Set(['fpu', 'sse', 'sse2', 'lm']) });

  it('the subdirectories and ISA levels the loader lists, whatever /proc/cpuinfo says', () => {
    const model = cpuModelOfLoader(x86, viewOf(DEBIAN_12_EPYC), baseline);
    expect(baseline.glibcHwcaps).toEqual([]);
    expect(model.glibcHwcaps).toEqual(['x86-64-v3', 'x86-64-v2']);
    // Baseline, v2, v3: a cache entry marked x86-64-v4 is passed over.
    expect(model.isaLevels).toBe(0b111);
    expect(model.legacyNames).toEqual(['x86_64', 'x86_64', 'tls']);
    expect(legacySubdirectories(model.legacyNames)[0]).toBe('tls/x86_64/x86_64/');
    expect(model.source).toBe('this machine');
  });

  it('x86-64-v4 when the loader searches it; glibc 2.37+: the legacy facts stay the table’s', () => {
    const model = cpuModelOfLoader(x86, viewOf(UBUNTU_24_04_XEON), baseline);
    expect(model.glibcHwcaps).toEqual(['x86-64-v4', 'x86-64-v3', 'x86-64-v2']);
    expect(model.isaLevels).toBe(0b1111);
    expect(model.legacyNames).toEqual(baseline.legacyNames);
  });

  it('aarch64: the atomics hwcap and its bit for cache entries', () => {
    const model = cpuModelOfLoader(arm, viewOf(DEBIAN_12_AARCH64), cpuModel(arm, true, null));
    expect(model.glibcHwcaps).toEqual([]);
    expect(model.legacyNames).toEqual(['atomics', 'aarch64', 'tls']);
    expect(model.acceptedHwcapBits & (1n << 8n)).toBe(1n << 8n);
  });
});
