// What is wrong with a cuda_compat libcuda on this kernel driver. With its note
// (.note.cuda.fwd_compatibility), NVIDIA's rule decides (compat-rule.ts): a kernel driver of a branch
// the note does not list, or one the compat libcuda is older than, is a finding; a listed branch with
// an older kernel driver is what compat is for. Without the note, the rule of versions alone: a compat
// libcuda older than the kernel driver stops CUDA with error 803. One as new as the kernel driver's own
// release loads and works (NVIDIA's toolkit would leave it out, having nothing to add): no finding.

import { byteStringToText, CUDA_COMPAT_NOTE_SECTION, type CudaCompatNote } from '../elf/elf.js';
import { LIBCUDA } from './cuda-dlopen.js';
import { compatDecision, compatDecisionText, driverBranch } from './compat-rule.js';
import { compareDriverVersions, type DriverVersion } from './driver-version.js';
import type { Finding, LibcudaChoice } from './findings.js';

/** Deciding on the machine that runs the programs, where NVIDIA's rule can be applied to its driver. */
const LINK_DRIVER_FIX =
  'or decide where the programs run: build with the driver hook only (no cuda_compat in the runpaths) and ' +
  'make the driver link there with cuda-patchelf link-driver /run/opengl-driver --cuda-compat DIR, which ' +
  "puts compat in front of the driver's libraries only where NVIDIA's rule allows it (docs/driver-link.md)";

function olderFinding(found: string, driver: DriverVersion, note: CudaCompatNote | null): Finding {
  const rule =
    note === null
      ? ''
      : `; NVIDIA's rule (its container toolkit's, with the note's driver branches ${note.driver.join(', ')}) uses compat only ` +
        'when it is newer than the kernel driver';
  return {
    severity: 'error',
    code: 'cuda-803',
    message:
      `${LIBCUDA} comes from cuda_compat: ${found}, older than the kernel driver ${driver.version} ` +
      `(${driver.source}): CUDA fails with error 803, "system has unsupported display driver / cuda ` +
      `driver combination" (CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)${rule}`,
    fix:
      'leave the compat directory out: in a built tree, cuda-patchelf apply --drop-cuda-compat DIR ... ' +
      'takes it out of every runpath; in the build, drop the cuda_compat hook ' +
      '(dontUseAutoAddCudaCompatRunpath = true; cuda-patchelf apply without --cuda-compat); or use a ' +
      `cuda_compat at least as new as the driver (${driver.version}); ${LINK_DRIVER_FIX}`,
  };
}

/** Findings about a compat libcuda `found` (its path and version in words) on the kernel driver `driver` (null: unknown). */
export function compatFindings(choice: LibcudaChoice, found: string, driver: DriverVersion | null): Finding[] {
  const findings: Finding[] = [];
  const { compatNote, version } = choice.facts;
  if (compatNote.kind === 'malformed')
    findings.push({
      severity: 'warning',
      code: 'compat-note-unreadable',
      message:
        `${found} carries a ${CUDA_COMPAT_NOTE_SECTION} that cannot be read (${compatNote.problem}): NVIDIA's ` +
        'container toolkit then decides as for a compat libcuda without one; doctor checks its version alone',
      fix: `use the compat libcuda as NVIDIA ships it (${byteStringToText(choice.map.path)} was changed or damaged)`,
    });
  if (driver === null) {
    findings.push({
      severity: 'warning',
      code: 'driver-version-unknown',
      message:
        `${LIBCUDA} comes from cuda_compat: ${found}; the kernel driver's version is unknown, so whether ` +
        'it is older (CUDA error 803) cannot be told',
      fix: 'run doctor where the driver is loaded, or pass --driver-version (nvidia-smi prints it) or --driver-lib',
    });
    return findings;
  }
  if (version === null) return findings;
  const note = compatNote.kind === 'note' ? compatNote.note : null;
  const decision = compatDecision(note, version, driver.version);
  if (note !== null && !decision.use && decision.reason === 'branch-not-listed') {
    findings.push({
      severity: 'error',
      code: 'compat-branch-unlisted',
      message:
        `${LIBCUDA} comes from cuda_compat: ${found}, and ${compatDecisionText(decision, note)} (${driver.source}): ` +
        "NVIDIA's rule (its container toolkit's) leaves compat out on that driver: CUDA forward compatibility " +
        'supports only the branches its note lists, and CUDA may fail to initialize',
      fix:
        'leave the compat directory out (cuda-patchelf apply --drop-cuda-compat DIR ..., or the build without the ' +
        `cuda_compat hook); or use a cuda_compat whose note lists branch ${driverBranch(decision.host)}; ${LINK_DRIVER_FIX}`,
    });
  } else if (compareDriverVersions(version, driver.version) < 0) findings.push(olderFinding(found, driver, note));
  return findings;
}
