// A plan's writes as its parts make them, put in execution order; and the one write of a record whose
// bytes changed only in part.

import type { PlannedWrite, WritePhase } from './plan.js';

const PHASE_ORDER: readonly WritePhase[] = ['data', 'headers', 'dynamic', 'cleanup', 'sections', 'unmark', 'settle'];

/** The writes sorted by phase; within a phase they keep the order they come in. */
export function inPhaseOrder(writes: readonly PlannedWrite[]): PlannedWrite[] {
  return writes
    .map((write, i) => ({ write, i }))
    .sort((a, b) => PHASE_ORDER.indexOf(a.write.phase) - PHASE_ORDER.indexOf(b.write.phase) || a.i - b.i)
    .map(({ write }) => write);
}

/** The smallest [first, end) outside which `next` equals `old` (same length); null when equal. */
function changedSpan(old: Uint8Array, next: Uint8Array): { first: number; end: number } | null {
  let first = 0;
  while (first < next.length && next[first] === old[first]) first++;
  if (first === next.length) return null;
  let end = next.length;
  while (end > first && next[end - 1] === old[end - 1]) end--;
  return { first, end };
}

/** One write of the span where `next` differs from `old`, the bytes at `offset`; none when they are equal. */
export function changedSpanWrites(phase: WritePhase, offset: number, old: Uint8Array, next: Uint8Array, what: string): PlannedWrite[] {
  const span = changedSpan(old, next);
  return span === null ? [] : [{ phase, offset: offset + span.first, bytes: next.slice(span.first, span.end), what }];
}
