// Runs an external oracle (readelf, patchelf) and keeps its exit status and both streams, so a test can
// tell "the tool disagrees" from "the tool refused the file".

import { execFile } from 'node:child_process';

export interface ToolResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export function runTool(command: string, args: readonly string[], timeoutMs = 120_000): Promise<ToolResult> {
  return new Promise((resolvePromise, reject) => {
    execFile(command, args, { timeout: timeoutMs, maxBuffer: 512 * 1024 * 1024, encoding: 'utf8' }, (error, stdout, stderr) => {
      const failure = error as (Error & { code?: number | string }) | null;
      if (failure !== null && typeof failure.code !== 'number') {
        reject(new Error(`${command} ${args.join(' ')}: ${failure.message}`));
        return;
      }
      resolvePromise({ code: failure === null ? 0 : (failure.code as number), stdout, stderr });
    });
  });
}

/** Runs `work` over `items` with at most `limit` running at once, results in input order. */
export async function mapLimited<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
