// The two ways the tests run the CLI: the built one (dist/cli/main.js) as a user would, with a time
// limit, and the same command tree inside the test process, where a test runs it hundreds of times.

import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { execTool, type ExecResult } from './exec.js';
import { REPO_ROOT } from './fixtures.js';
import { runCli as runCommandTree } from '../../src/cli/program.js';

export const cliPath = join(REPO_ROOT, 'dist', 'cli', 'main.js');

export interface CliResult extends ExecResult {
  /** Wall-clock time of the run, start-up included. */
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
  if (newestMtime(join(REPO_ROOT, 'src')) > built) {
    throw new Error(`${cliPath} is older than src/: run \`npm run build\` first`);
  }
}

export interface RunOptions {
  readonly timeoutMs?: number;
  /** A command and arguments to run node under (e.g. setpriv to drop root). */
  readonly wrapper?: readonly string[];
  readonly cwd?: string;
}

export async function runCli(args: readonly string[], options: RunOptions = {}): Promise<CliResult> {
  const [command = process.execPath, ...rest] = [...(options.wrapper ?? []), process.execPath, cliPath, ...args];
  const started = performance.now();
  // The caller's environment as it is (not cleanEnv's): the CLI runs as a user's shell would start it.
  const result = await execTool(command, rest, { env: process.env, timeoutMs: options.timeoutMs ?? 30_000, cwd: options.cwd ?? REPO_ROOT });
  return { ...result, ms: performance.now() - started };
}

/** stderr as lines, without the empty string after the final newline. */
export function stderrLines(result: CliResult): string[] {
  return result.stderr.split('\n').filter((line) => line.length > 0);
}

/**
 * The CLI's command tree (argument parsing, subcommands, the patchelf-compatible mode, the JSON report)
 * run inside the test process: the code of dist/cli/main.js without a Node start-up per call. Lines
 * are written as the entry point writes them; no signal can stop it, so there is no time limit.
 */
export async function runCliInProcess(argv: readonly string[]): Promise<ExecResult> {
  let stdout = '';
  let stderr = '';
  const code = await runCommandTree(argv, {
    out: (line) => {
      stdout += `${line}\n`;
    },
    err: (line) => {
      stderr += `${line}\n`;
    },
    errRaw: (text) => {
      stderr += text;
    },
    // runCli returns the code the command set.
    setExitCode: () => undefined,
    stderrIsTty: false,
    cpuCount: 1,
    host: { cwd: process.cwd(), arch: process.arch },
  });
  return { code, signal: null, stdout, stderr };
}
