// Whole-process measurements for the benchmarks: wall time, CPU use and peak RSS from GNU time, and
// the bytes the process tree wrote. A wrapper shell reads its own /proc/<pid>/io after the command:
// the kernel adds a reaped child's I/O counts to its parent's, so that covers every process.

import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface Measurement {
  readonly wallSeconds: number;
  /** CPU time / wall time: 1.0 is one core busy, 2.0 both. */
  readonly cpuCores: number;
  readonly peakRssKiB: number;
  /** Bytes passed to write system calls by the whole process tree (wchar). */
  readonly bytesWritten: number;
}

/** Runs `argv` once under GNU time; throws with its stderr when it fails. */
export async function measure(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<Measurement> {
  const dir = await mkdtemp(join(tmpdir(), 'cuda-patchelf-bench-'));
  const out = join(dir, 'time.txt');
  const io = join(dir, 'io.txt');
  const wrapper = '"$@"; status=$?; grep "^wchar" /proc/$$/io > "$IO_OUT"; exit $status';
  try {
    await run('/usr/bin/time', ['-o', out, '-f', '%e %U %S %M', 'sh', '-c', wrapper, 'sh', ...argv], { env: { ...env, IO_OUT: io }, maxBuffer: 256 * 2 ** 20 });
    const [wall, user, system, rss] = (await readFile(out, 'utf8')).trim().split(/\s+/).slice(-4).map(Number) as [number, number, number, number];
    const bytesWritten = Number((await readFile(io, 'utf8')).split(/\s+/)[1]);
    return { wallSeconds: wall, cpuCores: wall > 0 ? (user + system) / wall : 0, peakRssKiB: rss, bytesWritten };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

/** Copies a tree (cp -a: symlinks and hard links kept) to a fresh place; not part of any timing. */
export async function freshCopy(from: string, to: string): Promise<void> {
  await rm(to, { recursive: true, force: true });
  await run('cp', ['-a', from, to]);
  await run('sync', []);
}

export async function treeBytes(dir: string): Promise<number> {
  const { stdout } = await run('du', ['-sb', '--apparent-size', dir]);
  return Number(stdout.split(/\s+/)[0]);
}

export async function requireBenchTools(tools: readonly string[]): Promise<void> {
  for (const tool of tools) {
    try {
      await run('sh', ['-c', `command -v ${tool}`]);
    } catch {
      throw new Error(`the benchmark needs ${tool} (Debian package: ${tool === '/usr/bin/time' ? 'time' : tool}); install it first`);
    }
  }
}
