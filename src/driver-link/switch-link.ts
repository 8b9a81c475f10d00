// The switch to a new generation of the driver link, atomic for every program that starts meanwhile:
// the generation directory is made whole beside DEST (mkdtemp: a fresh name nothing points at), then a
// new symbolic link to it is renamed over DEST (rename(2) replaces a link in one step), so a program
// sees the old generation or the new one, never a half-made one. The generation DEST pointed at before
// is kept (a program may be opening its libraries this moment); older ones, and what a run killed
// halfway left, are removed. Whatever fails before the rename removes what this run made, and DEST is
// left as it was.

import { chmodSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { ioError } from '../errors/io-error.js';
import { generationPrefix, pendingLinkPrefix, type CurrentLink } from './current-link.js';
import type { PlannedLink } from './link-plan.js';

/** A generation is read by every user's programs: mkdtemp makes it 0700. */
const GENERATION_MODE = 0o755;

/** The io error of a failed write (or of DEST's directory not there), saying that DEST was left as it was. */
export function unchangedError(dest: string, error: unknown): CudaPatchelfError {
  const cause = ioError(dest, `make the driver link in ${dirname(dest)}`, error);
  return new CudaPatchelfError('io', `${cause.message}; left as it was`, { file: dest, cause: error });
}

/**
 * Removes the generations and pending links of DEST other than `keep`: what earlier runs left. One that
 * cannot be removed stays, harmless (nothing points at it), and is named in the result.
 */
function removeStale(dest: string, keep: ReadonlySet<string>): string[] {
  const parent = dirname(dest);
  const left: string[] = [];
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return left;
  }
  for (const name of names) {
    const ours = name.startsWith(generationPrefix(dest)) || name.startsWith(pendingLinkPrefix(dest));
    if (!ours || keep.has(name)) continue;
    try {
      rmSync(join(parent, name), { recursive: true, force: true });
    } catch {
      left.push(join(parent, name));
    }
  }
  return left;
}

export interface Switched {
  /** The generation DEST now links to (its name, beside DEST). */
  readonly generation: string;
  /** Earlier generations that could not be removed. */
  readonly leftBehind: readonly string[];
}

/** Makes a generation holding `plan` and switches DEST to it. */
export function switchLink(dest: string, plan: readonly PlannedLink[], current: CurrentLink): Switched {
  const parent = dirname(dest);
  let generation: string | null = null;
  const pending = join(parent, `${pendingLinkPrefix(dest)}${randomBytes(6).toString('hex')}`);
  try {
    generation = mkdtempSync(join(parent, generationPrefix(dest)));
    chmodSync(generation, GENERATION_MODE);
    mkdirSync(join(generation, 'lib'));
    chmodSync(join(generation, 'lib'), GENERATION_MODE);
    for (const link of plan) symlinkSync(link.target, join(generation, link.path));
    symlinkSync(basename(generation), pending);
    renameSync(pending, dest);
  } catch (error) {
    rmSync(pending, { force: true });
    if (generation !== null) rmSync(generation, { recursive: true, force: true });
    throw unchangedError(dest, error);
  }
  const made = basename(generation);
  return {
    generation: made,
    leftBehind: removeStale(dest, new Set([made, ...(current.kind === 'generation' ? [current.generation] : [])])),
  };
}
