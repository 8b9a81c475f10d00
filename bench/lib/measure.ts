// Whole-process measurements for the benchmarks: CPU use and peak RSS from GNU time, wall time and
// what the process tree wrote. A wrapper shell reads its own /proc/<pid>/io after the command: the
// kernel adds a reaped child's I/O counts to its parent's, so that covers every process.

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
  /** The largest resident set of any one process of the tree (GNU time's %M). */
  readonly peakRssKiB: number;
  /** Bytes passed to write system calls by the whole process tree (/proc/<pid>/io wchar). */
  readonly wchar: number;
  /** Bytes the process tree caused to be written to storage: dirtied page-cache pages (write_bytes). */
  readonly writeBytes: number;
}

/** Runs `argv` once under GNU time; throws with its stderr when it fails. */
export async function measure(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<Measurement> {
  const dir = await mkdtemp(join(tmpdir(), 'cuda-patchelf-bench-'));
  const out = join(dir, 'time.txt');
  const io = join(dir, 'io.txt');
  // GNU time's wall clock has 10 ms steps: the wrapper takes its own, in nanoseconds. It writes only
  // after reading its counters, so its own writes are not counted.
  const wrapper =
    'start=$(date +%s%N); "$@"; status=$?; end=$(date +%s%N); cat /proc/$$/io > "$IO_OUT"; echo "wall_ns: $((end - start))" >> "$IO_OUT"; exit $status';
  try {
    await run('/usr/bin/time', ['-o', out, '-f', '%U %S %M', 'sh', '-c', wrapper, 'sh', ...argv], {
      env: { ...env, IO_OUT: io },
      maxBuffer: 256 * 2 ** 20,
    });
    const [user, system, rss] = (await readFile(out, 'utf8')).trim().split(/\s+/).slice(-3).map(Number) as [number, number, number];
    const counters = new Map((await readFile(io, 'utf8')).split('\n').map((line) => line.split(': ') as [string, string]));
    const wall = Number(counters.get('wall_ns')) / 1e9;
    return {
      wallSeconds: wall,
      cpuCores: wall > 0 ? (user + system) / wall : 0,
      peakRssKiB: rss,
      wchar: Number(counters.get('wchar')),
      writeBytes: Number(counters.get('write_bytes')),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export function spread(values: readonly number[]): Spread {
  return { median: median(values), min: Math.min(...values), max: Math.max(...values) };
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

export interface TreeSample {
  readonly m: Measurement;
  /** How many bytes the tree grew by (apparent sizes). */
  readonly growth: number;
}

/**
 * Runs a command over a fresh copy of `source` at `work`, `repeat` times; `{}` in argv stands for the
 * copy. The copy stays in place after the last run, for a look at what the command did.
 */
export async function sampleOnFreshCopies(
  source: string,
  work: string,
  argv: readonly string[],
  repeat: number,
  env?: NodeJS.ProcessEnv,
): Promise<TreeSample[]> {
  const samples: TreeSample[] = [];
  for (let i = 0; i < repeat; i++) {
    await freshCopy(source, work);
    const before = await treeBytes(work);
    const m = await measure(
      argv.map((arg) => (arg === '{}' ? work : arg)),
      env,
    );
    samples.push({ m, growth: (await treeBytes(work)) - before });
  }
  return samples;
}

/** The sample with the median wall time (the lower middle one for an even count). */
export function medianSample<T extends { readonly m: Measurement }>(samples: readonly T[]): T {
  const sorted = [...samples].sort((a, b) => a.m.wallSeconds - b.m.wallSeconds);
  const chosen = sorted[Math.floor((sorted.length - 1) / 2)];
  if (chosen === undefined) throw new Error('no samples');
  return chosen;
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
