// The tests' temporary directories: one name scheme, cuda-patchelf-LABEL-XXXXXX, so that what a run
// leaves behind says which test made it. Free of vitest: the campaign scripts use it too.

import { existsSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** tmpfs where the machine has one: it keeps a campaign's thousands of scratch writes off the disk. */
export const MEMORY_TMP = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();

/** A fresh directory cuda-patchelf-LABEL-XXXXXX under `parent` (the system's temporary directory). */
export function makeTempDir(label: string, parent: string = tmpdir()): Promise<string> {
  return mkdtemp(join(parent, `cuda-patchelf-${label}-`));
}
