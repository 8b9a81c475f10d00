// System roots for doctor --root tests: a copy of the aarch64 sysroot with fixture directories placed
// inside it at their own absolute paths. Hard links where the file system allows (instant, no space),
// copies otherwise.

import { mkdir } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { requireTool } from './fixtures.js';
import { execTool, mustExec } from './exec.js';

async function linkOrCopy(source: string, destination: string): Promise<void> {
  const linked = await execTool(requireTool('cp'), ['-al', source, destination], { timeoutMs: 300_000 });
  if (linked.code !== 0) await mustExec(requireTool('cp'), ['-a', source, destination], { timeoutMs: 600_000 });
}

/** Directories without those inside another one of the list. */
function outermost(directories: readonly string[]): string[] {
  const sorted = [...new Set(directories)].sort();
  return sorted.filter(
    (dir) => !sorted.some((other) => other !== dir && !relative(other, dir).startsWith('..') && relative(other, dir) !== ''),
  );
}

/**
 * Puts each directory into `root`: its contents at `at` (e.g. '/' for a sysroot), or, with `at` null,
 * at its own absolute path inside the root.
 */
export async function mirrorInto(root: string, directories: readonly string[], at: string | null): Promise<void> {
  for (const directory of outermost(directories)) {
    if (at !== null) {
      await mkdir(join(root, at), { recursive: true });
      await linkOrCopy(`${directory}${sep}.`, join(root, at));
      continue;
    }
    const destination = join(root, directory);
    await mkdir(dirname(destination), { recursive: true });
    await linkOrCopy(directory, destination);
  }
}
