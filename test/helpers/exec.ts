// The one way the tests run a process (a real tool, the built CLI, a program under test): no shell, a
// time limit, the exit status as data. The helpers that run something specific are call sites of it.

import { execFile } from 'node:child_process';

export interface ExecResult {
  /** Exit status; null when killed (time limit or signal). */
  readonly code: number | null;
  readonly signal: string | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface ExecOptions {
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  readonly timeoutMs?: number;
}

/** The caller's environment without loader and qemu variables, in the C locale: a test controls what ld.so sees. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!key.startsWith('LD_') && !key.startsWith('QEMU_')) env[key] = value;
  }
  return { ...env, LC_ALL: 'C', ...extra };
}

/** execFile without a shell; never rejects for a non-zero exit (the result says so), only when it cannot start. */
export function execTool(file: string, args: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
  return new Promise((resolvePromise, reject) => {
    execFile(
      file,
      [...args],
      {
        env: options.env ?? cleanEnv(),
        timeout: options.timeoutMs ?? 120_000,
        killSignal: 'SIGKILL',
        maxBuffer: 512 * 1024 * 1024,
        encoding: 'utf8',
        ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
      },
      (error, stdout, stderr) => {
        const failure = error as (Error & { code?: number | string; signal?: string | null }) | null;
        if (failure !== null && typeof failure.code === 'string') {
          reject(new Error(`cannot run ${file} ${args.join(' ')}: ${failure.message}`));
          return;
        }
        resolvePromise({
          code: failure === null ? 0 : typeof failure.code === 'number' ? failure.code : null,
          signal: failure?.signal ?? null,
          stdout,
          stderr,
        });
      },
    );
  });
}

/** execTool that throws (with both streams) unless the command exits 0. */
export async function mustExec(file: string, args: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
  const result = await execTool(file, args, options);
  if (result.code !== 0) {
    throw new Error(`${file} ${args.join(' ')} exited ${String(result.code ?? result.signal)}\n${result.stderr}${result.stdout}`);
  }
  return result;
}
