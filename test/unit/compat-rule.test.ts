// NVIDIA's rule for a cuda_compat libcuda, as its container toolkit applies it (UseCompat and its
// tests in cmd/nvidia-cdi-hook/cudacompat): with the note, the kernel driver's branch must be listed
// and compat strictly newer; without it, the kernel driver's major must be lower than compat's; with a
// version unknown, no compat. The cases are the toolkit's own, and the H200's.

import { describe, expect, it } from 'vitest';
import type { CudaCompatNote } from '../../src/elf/cuda-compat-note.js';
import { compatDecision, compatDecisionText } from '../../src/doctor/compat-rule.js';

/** The note of the compat libcuda 575.57.08 in the toolkit's tests. */
const NOTE_575: CudaCompatNote = {
  format: 1,
  cudaVersion: '12.9',
  driver: [535, 550, 560, 565, 570, 575],
  device: [1, 2, 7, 8, 9, 10, 11, 12, 13, 14],
};
/** The note of the H200's compat libcuda 580.95.05. */
const NOTE_580: CudaCompatNote = {
  format: 1,
  cudaVersion: '13.0',
  driver: [535, 550, 565, 570, 575, 580],
  device: [1, 2, 7, 8, 9, 10, 11, 12, 13, 14],
};

// The toolkit's cases: with the note of compat 575.57.08, and without a note.
it.each([
  ['with the note, host branch not listed', '575.57.08', '590.44.01', NOTE_575, { use: false, reason: 'branch-not-listed' }],
  ['with the note, listed branch, older host', '575.57.08', '570.211.01', NOTE_575, { use: true, rule: 'note' }],
  ['with the note, same branch, compat newer', '575.57.08', '575.10.10', NOTE_575, { use: true, rule: 'note' }],
  ['with the note, same version', '575.57.08', '575.57.08', NOTE_575, { use: false, reason: 'not-newer' }],
  ['with the note, same branch, compat older', '575.57.08', '575.99.99', NOTE_575, { use: false, reason: 'not-newer' }],
  ['without the note, host major lower', '575.57.08', '570.211.01', null, { use: true, rule: 'major' }],
  ['without the note, same major, compat newer', '575.57.08', '575.10.10', null, { use: false, reason: 'major-not-lower' }],
  ['without the note, host major higher', '575.57.08', '580.159.04', null, { use: false, reason: 'major-not-lower' }],
] as const)("NVIDIA's rule %s: compat %s on %s", (_, compat, host, note, expected) => {
  expect(compatDecision(note, compat, host)).toEqual({ ...expected, compat, host });
});

describe("NVIDIA's rule with the note", () => {
  it('the H200: compat 580.95.05 on the kernel driver 580.159.04 is left out, and says why', () => {
    const decision = compatDecision(NOTE_580, '580.95.05', '580.159.04');
    expect(decision).toEqual({ use: false, reason: 'not-newer', compat: '580.95.05', host: '580.159.04' });
    expect(compatDecisionText(decision, NOTE_580)).toBe('compat 580.95.05 is not newer than the kernel driver 580.159.04');
  });

  it('names the kernel driver and the branches listed when the branch is not', () => {
    const decision = compatDecision(NOTE_580, '590.44.01', '560.35.03');
    expect(decision.use).toBe(false);
    expect(compatDecisionText(decision, NOTE_580)).toBe(
      'the kernel driver 560.35.03 is of branch 560, which its note does not list (535, 550, 565, 570, 575, 580)',
    );
  });

  it('a note that lists no branches (a Jetson compat libcuda) allows none', () => {
    expect(compatDecision({ ...NOTE_580, driver: [] }, '590.44.01', '580.159.04')).toMatchObject({
      use: false,
      reason: 'branch-not-listed',
    });
  });
});

describe("NVIDIA's rule without a version", () => {
  it('no compat when either version is unknown', () => {
    expect(compatDecision(NOTE_580, null, '580.159.04')).toEqual({ use: false, reason: 'version-unknown', unknown: 'compat' });
    expect(compatDecision(NOTE_580, '590.44.01', null)).toEqual({ use: false, reason: 'version-unknown', unknown: 'host' });
  });
});
