// A plan: the ordered positional writes that turn a file into its edited form, cheapest tier first.

import type { LaterFact } from './edit-facts.js';

/**
 * - `noop`: nothing to change, nothing is written (not even the timestamp).
 * - `in-place`: strings and tags fit where they are (old string bytes, zeroed slack, spare DT_NULL slots).
 * - `append`: tables copied or grown at the end of the file, mapped by a new or extended PT_LOAD.
 * - `rewrite`: a new file renamed over the old one, only where the append tier cannot map new data (an
 *   executable whose program header table has no room): see shift-for-rewrite.ts.
 */
export type Tier = 'noop' | 'in-place' | 'append' | 'rewrite';

/**
 * When a write becomes visible to the loader, in execution order:
 * - `data`: bytes nothing references yet (appended tables, strings put into unused slack);
 * - `headers`: program headers and the ELF header that map the new data;
 * - `dynamic`: the dynamic array entries that switch to the new tables and values;
 * - `cleanup`: dead strings overwritten with zeros;
 * - `sections`: section headers describing what moved (tools only, never the loader); they come after
 *   the cleanup so that a run cut short before the cleanup ends is seen by its stale `.dynstr` header
 *   and finished by the next run (resume-edit.ts);
 * - `unmark`: the mark a plan with a cleanup puts on the dynamic array's DT_NULL entries (in its `data`
 *   phase, and in the switch itself) is cleared: the cleanup is done (cleanup-mark.ts);
 * - `settle`: a program header table that moved out of the way goes back to its place, grown, once
 *   what followed it is no longer referenced.
 * `--durable` syncs the file to disk between phases.
 */
export type WritePhase = 'data' | 'headers' | 'dynamic' | 'cleanup' | 'sections' | 'unmark' | 'settle';

export interface PlannedWrite {
  readonly phase: WritePhase;
  readonly offset: number;
  readonly bytes: Uint8Array;
  /** What the bytes are, for reports and errors. */
  readonly what: string;
}

export interface Plan {
  readonly tier: Tier;
  /** In execution order: every prefix of this list leaves a valid, loadable ELF file. */
  readonly writes: readonly PlannedWrite[];
  /**
   * The file size after the plan (the original size, or more when data is appended). Writes may reach
   * past it (a table needed only while the edit runs): the file is cut to this size after the last one.
   */
  readonly newSize: number;
  /**
   * Tier `rewrite` only: the writes go to a new file that holds `shift` zero bytes and then the whole
   * old file, and which then replaces it.
   */
  readonly shift?: number;
}

/** A plan: what planning comes to once every fact it needs is at hand and some tier fits. */
export interface Planned {
  readonly kind: 'plan';
  readonly plan: Plan;
}

/**
 * The append tier cannot map new data (an executable whose program header table has no room): only
 * the whole-file rewrite can make this edit.
 */
export interface NeedsRewrite {
  readonly kind: 'needs-rewrite';
  /** Why, in words (the edit's error when the rewrite is not offered). */
  readonly why: string;
}

/**
 * The plan needs a fact that is read only on request (the .dynsym names, the .symtab bytes): the
 * caller reads it and plans again. Most edits need neither, and those tables are the largest reads.
 */
export interface NeedsFacts {
  readonly kind: 'needs-facts';
  readonly facts: LaterFact;
}

/** No tier fits this edit of this file, the rewrite included: the file is refused (`unsupported`), unchanged. */
export interface Unsupported {
  readonly kind: 'unsupported';
  /** Why, in words: the refusal's message. */
  readonly why: string;
}

/** What planning comes to when it does not come to a plan: each is a returned value, never an exception. */
export type NoPlan = NeedsRewrite | NeedsFacts | Unsupported;

/** What planning one file comes to: a plan, or what must happen before there can be one. */
export type PlanDecision = Planned | NoPlan;

export function planned(plan: Plan): Planned {
  return { kind: 'plan', plan };
}

export function needsRewrite(why: string): NeedsRewrite {
  return { kind: 'needs-rewrite', why };
}

export function needsFacts(facts: LaterFact): NeedsFacts {
  return { kind: 'needs-facts', facts };
}

export function unsupported(why: string): Unsupported {
  return { kind: 'unsupported', why };
}

/** The bytes a plan would write (what was written is the write's own count, EditResult.bytesWritten). */
export function plannedBytes(plan: Plan): number {
  return plan.writes.reduce((sum, write) => sum + write.bytes.length, 0);
}
