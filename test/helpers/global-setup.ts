// vitest globalSetup: builds (or checks, when the cache is complete) the ELF fixtures once
// before any test file runs.
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from './fixtures.js';

export default function setup(): void {
  const script = join(REPO_ROOT, 'fixtures', 'build.sh');
  const result = spawnSync('bash', [script], { cwd: REPO_ROOT, stdio: 'inherit' });
  if (result.error) throw new Error(`cannot run bash ${script}: ${result.error.message}`);
  if (result.status !== 0) {
    throw new Error(`bash ${script} failed (exit ${String(result.status ?? result.signal)}): see its output above`);
  }
}
