// The closure benchmark's tree, shared by the benchmark (closure.ts) and the audit (closure-audit.ts).

import { spawn } from 'node:child_process';
import { join } from 'node:path';

/** Where the closure is downloaded, laid out and copied: bench/.cache/closure/. */
export const CLOSURE_CACHE = join(import.meta.dirname, '..', '.cache', 'closure');

/**
 * Runs assemble.sh, which downloads the pinned packages and lays them out as build outputs the first
 * time and checks them after that, and returns the tree: CLOSURE_CACHE/tree/<arch>/<output>/.
 */
export async function assembleTree(): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    const child = spawn('bash', [join(import.meta.dirname, 'assemble.sh')], { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`assemble.sh exited with ${code}`))));
  });
  return join(CLOSURE_CACHE, 'tree');
}
