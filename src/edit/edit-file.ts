// Editing one named file (the single-file commands, the patchelf-compatible mode): the shared
// pipeline plans it, and the plan is written, or the file refused and left byte-identical.

import type { Plan, Tier } from '../plan/plan.js';
import { commitPlan } from '../write/commit-plan.js';
import { planCommandLineFile, type EditOperations } from './plan-file.js';

export type { EditOperations } from './plan-file.js';

export interface EditOptions {
  /** Write the result to this file and leave the input alone. */
  readonly output?: string;
  /** fsync between the data and the header writes. */
  readonly durable?: boolean;
  /** Edit files without write permission (the mode is restored afterwards). */
  readonly makeWritable?: boolean;
  /** Plan only. */
  readonly dryRun?: boolean;
}

export interface EditResult<T = void> {
  readonly file: string;
  readonly tier: Tier;
  readonly bytesWritten: number;
  readonly plan: Plan;
  readonly oldSize: number;
  /** What the operations returned. */
  readonly answer: T;
}

/**
 * Reads, plans and writes one file; a symbolic link is followed, as patchelf does. Errors name the
 * file; a refused file is left byte-identical.
 */
export async function editElfFile<T = void>(
  path: string,
  operations: EditOperations<T>,
  options: EditOptions = {},
): Promise<EditResult<T>> {
  const { plan, facts, stats, answer } = await planCommandLineFile(path, operations);
  let bytesWritten = 0;
  if (!options.dryRun) {
    const written = await commitPlan(path, plan, stats, options);
    if (written.kind === 'failed') throw written.error;
    bytesWritten = written.bytes;
  }
  return { file: path, tier: plan.tier, bytesWritten, plan, oldSize: facts.fileSize, answer };
}
