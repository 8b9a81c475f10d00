// Which cuda_compat goes in front of the driver's libraries: the newest candidate that NVIDIA's rule
// (doctor/compat-rule.ts) allows on the kernel driver, or none; and for every candidate why it was
// chosen or left out. A note that cannot be read counts as none, as NVIDIA's toolkit counts it.

import { compareDriverVersions } from '../doctor/driver-version.js';
import { compatDecision, compatDecisionText, type CompatDecision } from '../doctor/compat-rule.js';
import type { CompatCandidate } from './compat-candidate.js';

export interface CompatVerdict {
  readonly candidate: CompatCandidate;
  /** NVIDIA's decision; null for a candidate that could not be weighed (its `problem`). */
  readonly decision: CompatDecision | null;
  readonly chosen: boolean;
  /** Why it was chosen or left out, in words. */
  readonly why: string;
}

export interface CompatChoice {
  readonly chosen: CompatCandidate | null;
  /** One per candidate, in the order given. */
  readonly verdicts: readonly CompatVerdict[];
}

/** The choice among `candidates` on a kernel driver of version `host`. */
export function chooseCompat(candidates: readonly CompatCandidate[], host: string): CompatChoice {
  const weighed = candidates.map((candidate) => {
    const note = candidate.note.kind === 'note' ? candidate.note.note : null;
    return { candidate, note, decision: candidate.problem === null ? compatDecision(note, candidate.version, host) : null };
  });
  const allowed = weighed.filter((entry) => entry.decision?.use === true);
  // The newest allowed; of two alike, the one named first.
  const chosen = allowed.reduce<(typeof allowed)[number] | null>(
    (best, entry) =>
      best === null || compareDriverVersions(entry.candidate.version ?? '', best.candidate.version ?? '') > 0 ? entry : best,
    null,
  );
  const verdicts = weighed.map(({ candidate, note, decision }): CompatVerdict => {
    const unreadable =
      candidate.note.kind === 'malformed' ? `its note cannot be read (${candidate.note.problem}), so it counts as none: ` : '';
    if (decision === null) return { candidate, decision, chosen: false, why: candidate.problem ?? '' };
    const rule = `${unreadable}${compatDecisionText(decision, note)}`;
    if (!decision.use || chosen === null) return { candidate, decision, chosen: false, why: `NVIDIA's rule: ${rule}` };
    if (chosen.candidate === candidate) return { candidate, decision, chosen: true, why: `NVIDIA's rule: ${rule}` };
    return {
      candidate,
      decision,
      chosen: false,
      why: `NVIDIA's rule allows it (${rule}), but ${chosen.candidate.dir} (${chosen.candidate.version ?? ''}) is newer`,
    };
  });
  return { chosen: chosen?.candidate ?? null, verdicts };
}
