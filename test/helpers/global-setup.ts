// vitest globalSetup: builds (or checks, when the cache is complete) the ELF fixtures once
// before any test file runs, and checks after the last one that no test wrote to a fixture: the
// fixtures are shared by every test file, so a test that edits one through a hard link (or in place)
// changes what the tests that run after it, or beside it, see.
import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { fixtures, REPO_ROOT } from './fixtures.js';

/**
 * What a write leaves on a file: its size and modification time. (Not the change time: a test may hard
 * link a fixture it only reads, and a new link changes that.)
 */
function stamp(path: string): string {
  const stats = statSync(path, { bigint: true });
  return `${stats.size} ${stats.mtimeNs}`;
}

export default function setup(): () => void {
  const script = join(REPO_ROOT, 'fixtures', 'build.sh');
  const result = spawnSync('bash', [script], { cwd: REPO_ROOT, stdio: 'inherit' });
  if (result.error) throw new Error(`cannot run bash ${script}: ${result.error.message}`);
  if (result.status !== 0) {
    throw new Error(`bash ${script} failed (exit ${String(result.status ?? result.signal)}): see its output above`);
  }
  const before = new Map(fixtures().map((entry) => [entry.path, stamp(entry.path)]));
  return () => {
    const written = [...before].filter(([path, was]) => stamp(path) !== was).map(([path]) => path);
    if (written.length > 0) throw new Error(`a test wrote to fixtures shared by every test: ${written.join(', ')}`);
  };
}
