// Whether a cuda_compat libcuda may be used on a machine, as NVIDIA decides it: the container toolkit's
// UseCompat (cmd/nvidia-cdi-hook/cudacompat), which runs where the programs run, at container start.
// - With the note (.note.cuda.fwd_compatibility) and both driver versions known: compat is used only
//   when the kernel driver's major is among the note's driver branches AND the compat driver version
//   (from its libcuda.so.X.Y.Z's name) is strictly newer than the kernel driver's.
// - Without the note (older compat packages): when the kernel driver's major is lower than compat's.
// - Without a driver version: the toolkit compares the note's CUDA release with the host's, which is
//   not known here, so compat is not used.

import type { CudaCompatNote } from '../elf/elf.js';
import { compareDriverVersions } from './driver-version.js';

/** The two versions compared: the compat libcuda's and the kernel driver's. */
interface Versions {
  readonly compat: string;
  readonly host: string;
}

export type CompatDecision =
  | { readonly use: false; readonly reason: 'version-unknown'; readonly unknown: 'compat' | 'host' }
  | (Versions & { readonly use: true; readonly rule: 'note' | 'major' })
  | (Versions & { readonly use: false; readonly reason: 'branch-not-listed' | 'not-newer' | 'major-not-lower' });

/** A driver version's major, its branch: 580 of 580.159.04. */
export function driverBranch(version: string): number {
  return Number(version.split('.')[0]);
}

/** NVIDIA's decision for a compat libcuda of version `compat` (null: unknown) with its note (null: none) on a kernel driver `host`. */
export function compatDecision(note: CudaCompatNote | null, compat: string | null, host: string | null): CompatDecision {
  if (compat === null || host === null) return { use: false, reason: 'version-unknown', unknown: compat === null ? 'compat' : 'host' };
  const versions = { compat, host };
  if (note === null)
    return driverBranch(host) < driverBranch(compat)
      ? { ...versions, use: true, rule: 'major' }
      : { ...versions, use: false, reason: 'major-not-lower' };
  if (!note.driver.includes(driverBranch(host))) return { ...versions, use: false, reason: 'branch-not-listed' };
  return compareDriverVersions(compat, host) > 0
    ? { ...versions, use: true, rule: 'note' }
    : { ...versions, use: false, reason: 'not-newer' };
}

/** The decision in words, for a line or a finding: which versions, branches and rule decided it. */
export function compatDecisionText(decision: CompatDecision, note: CudaCompatNote | null): string {
  const listed = note === null || note.driver.length === 0 ? 'none' : note.driver.join(', ');
  if (decision.use)
    return decision.rule === 'note'
      ? `the kernel driver ${decision.host} is of a branch its note lists (${listed}), and compat ${decision.compat} is newer`
      : `it has no compatibility note, and the kernel driver's major (${decision.host}) is lower than compat's (${decision.compat})`;
  switch (decision.reason) {
    case 'version-unknown':
      return decision.unknown === 'compat'
        ? "its libcuda's name (libcuda.so.X.Y.Z) gives no driver version to compare with the kernel driver's"
        : 'the kernel driver version is unknown';
    case 'branch-not-listed':
      return `the kernel driver ${decision.host} is of branch ${driverBranch(decision.host)}, which its note does not list (${listed})`;
    case 'not-newer':
      return `compat ${decision.compat} is not newer than the kernel driver ${decision.host}`;
    case 'major-not-lower':
      return (
        `it has no compatibility note, and the kernel driver's major (${decision.host}) is not lower than ` +
        `compat's (${decision.compat})`
      );
  }
}
