// What link-driver decides before it touches the disk, pure: which cuda_compat goes in front (the newest
// that NVIDIA's rule allows, and why each other one is left out), and the links that result (compat's
// libraries replace the driver's of the same name, and both replace --base's). Run on the disk, with
// real libraries and the loader, in test/link-driver-*.test.ts.

import { describe, expect, it } from 'vitest';
import type { CudaCompatNote } from '../../src/elf/cuda-compat-note.js';
import { chooseCompat } from '../../src/driver-link/choose-compat.js';
import type { CompatCandidate } from '../../src/driver-link/compat-candidate.js';
import { planLinks } from '../../src/driver-link/link-plan.js';

const NOTE_580: CudaCompatNote = { format: 1, cudaVersion: '13.0', driver: [535, 550, 565, 570, 575, 580], device: [] };

function candidate(
  dir: string,
  version: string | null,
  note: CudaCompatNote | 'none' | 'malformed',
  problem: string | null = null,
): CompatCandidate {
  return {
    dir,
    libcuda: version === null ? null : `${dir}/compat/libcuda.so.${version}`,
    version,
    note:
      note === 'none'
        ? { kind: 'absent' }
        : note === 'malformed'
          ? { kind: 'malformed', problem: 'the description is not JSON' }
          : { kind: 'note', note },
    files: version === null ? [] : [`${dir}/compat/libcuda.so.${version}`],
    problem,
  };
}

describe('the cuda_compat chosen', () => {
  it('the newest that the rule allows; an allowed older one says which is newer, one left out says the rule', () => {
    const older = candidate('/c/580', '580.95.05', NOTE_580);
    const newer = candidate('/c/595', '595.10.01', { ...NOTE_580, driver: [580, 595] });
    const allowed = candidate('/c/590', '590.44.01', { ...NOTE_580, driver: [580, 590] });
    const choice = chooseCompat([older, allowed, newer], '580.159.04');
    expect(choice.chosen).toBe(newer);
    expect(choice.verdicts.map((verdict) => [verdict.candidate.dir, verdict.chosen, verdict.why])).toEqual([
      ['/c/580', false, "NVIDIA's rule: compat 580.95.05 is not newer than the kernel driver 580.159.04"],
      [
        '/c/590',
        false,
        "NVIDIA's rule allows it (the kernel driver 580.159.04 is of a branch its note lists (580, 590), and compat 590.44.01 is newer), but /c/595 (595.10.01) is newer",
      ],
      [
        '/c/595',
        true,
        "NVIDIA's rule: the kernel driver 580.159.04 is of a branch its note lists (580, 595), and compat 595.10.01 is newer",
      ],
    ]);
  });

  it('none when none is allowed: the driver stands alone, and each candidate says why', () => {
    const choice = chooseCompat(
      [candidate('/c/old', '580.95.05', NOTE_580), candidate('/c/jetson', null, 'none', '/c/jetson/compat holds no libcuda.so.X.Y.Z')],
      '580.159.04',
    );
    expect(choice.chosen).toBeNull();
    expect(choice.verdicts.map((verdict) => verdict.why)).toEqual([
      "NVIDIA's rule: compat 580.95.05 is not newer than the kernel driver 580.159.04",
      '/c/jetson/compat holds no libcuda.so.X.Y.Z',
    ]);
  });

  it('a note that cannot be read counts as none (the rule of majors), and says so', () => {
    const choice = chooseCompat([candidate('/c/590', '590.44.01', 'malformed')], '580.159.04');
    expect(choice.chosen?.dir).toBe('/c/590');
    expect(choice.verdicts[0]?.why).toBe(
      "NVIDIA's rule: its note cannot be read (the description is not JSON), so it counts as none: it has no compatibility note, and the kernel driver's major (580.159.04) is lower than compat's (590.44.01)",
    );
  });

  it('of two alike, the one named first', () => {
    const first = candidate('/c/a', '590.44.01', { ...NOTE_580, driver: [580] });
    const second = candidate('/c/b', '590.44.01', { ...NOTE_580, driver: [580] });
    expect(chooseCompat([first, second], '580.159.04').chosen).toBe(first);
  });
});

describe('the links', () => {
  const library = (file: string, ...names: string[]) => ({ file, names, machine: '62/64' });

  it("compat's libraries take the names they share with the driver's, libcuda first; the driver's others stay", () => {
    const links = planLinks(
      [library('/c/compat/libcuda.so.590.44.01', 'libcuda.so.1', 'libcuda.so.590.44.01', 'libcuda.so')],
      [
        library('/d/libcuda.so.580.159.04', 'libcuda.so.1', 'libcuda.so.580.159.04', 'libcuda.so'),
        library('/d/libnvidia-ml.so.580.159.04', 'libnvidia-ml.so.1', 'libnvidia-ml.so.580.159.04', 'libnvidia-ml.so'),
      ],
      [
        { path: 'share', target: '/base/share' },
        { path: 'lib/libcuda.so.1', target: '/base/lib/libcuda.so.1' },
        { path: 'lib/libEGL_mesa.so.0', target: '/base/lib/libEGL_mesa.so.0' },
      ],
    );
    expect(links.map((link) => [link.path, link.target, link.from])).toEqual([
      ['lib/libcuda.so.1', '/c/compat/libcuda.so.590.44.01', 'compat'],
      ['lib/libcuda.so.590.44.01', '/c/compat/libcuda.so.590.44.01', 'compat'],
      ['lib/libcuda.so', '/c/compat/libcuda.so.590.44.01', 'compat'],
      ['lib/libcuda.so.580.159.04', '/d/libcuda.so.580.159.04', 'driver'],
      ['lib/libnvidia-ml.so.1', '/d/libnvidia-ml.so.580.159.04', 'driver'],
      ['lib/libnvidia-ml.so.580.159.04', '/d/libnvidia-ml.so.580.159.04', 'driver'],
      ['lib/libnvidia-ml.so', '/d/libnvidia-ml.so.580.159.04', 'driver'],
      ['share', '/base/share', 'base'],
      ['lib/libEGL_mesa.so.0', '/base/lib/libEGL_mesa.so.0', 'base'],
    ]);
  });
});
