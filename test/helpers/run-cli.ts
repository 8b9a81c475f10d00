// Runs the built CLI (dist/cli/main.js) as a user would, with a time limit, and keeps everything it said.

import { execFile } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const cliPath = join(repoRoot, 'dist', 'cli', 'main.js');

export interface CliResult {
  /** Exit status; null when the process was killed (time limit). */
  readonly code: number | null;
  readonly signal: string | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/** Fails loudly when the CLI under test is missing or older than the sources it is built from. */
export function assertCliBuilt(): void {
  let built: number;
  try {
    built = statSync(cliPath).mtimeMs;
  } catch {
    throw new Error(`${cliPath} does not exist: run \`npm run build\` first`);
  }
  if (newestMtime(join(repoRoot, 'src')) > built) {
    throw new Error(`${cliPath} is older than src/: run \`npm run build\` first`);
  }
}

export interface RunOptions {
  readonly timeoutMs?: number;
  /** A command and arguments to run node under (e.g. setpriv to drop root). */
  readonly wrapper?: readonly string[];
  readonly cwd?: string;
}

export function runCli(args: readonly string[], options: RunOptions = {}): Promise<CliResult> {
  const wrapper = options.wrapper ?? [];
  const [command, ...rest] = [...wrapper, process.execPath, cliPath, ...args];
  const started = performance.now();
  return new Promise((resolvePromise) => {
    execFile(
      command ?? process.execPath,
      rest,
      { timeout: options.timeoutMs ?? 30_000, killSignal: 'SIGKILL', maxBuffer: 256 * 1024 * 1024, encoding: 'utf8', cwd: options.cwd ?? repoRoot },
      (error, stdout, stderr) => {
        const ms = performance.now() - started;
        const failure = error as (Error & { code?: number | string; signal?: string | null }) | null;
        const code = failure === null ? 0 : typeof failure.code === 'number' ? failure.code : null;
        resolvePromise({ code, signal: failure?.signal ?? null, stdout, stderr, ms });
      },
    );
  });
}

/** stderr as lines, without the empty string after the final newline. */
export function stderrLines(result: CliResult): string[] {
  return result.stderr.split('\n').filter((line) => line.length > 0);
}
