// One library at a time: adding the driver directory to each CUDA library's runpath, cuda-patchelf vs
// patchelf, each on a fresh copy, measured as whole processes in the same run.
//   npx vite-node bench/edit-vs-patchelf.ts            (fetches libcublasLt on first use, ~0.5 GB)
// Reports wall time (median of REPEAT runs), peak RSS, bytes written and the file's growth.

import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { loadManifest } from '../test/helpers/fixtures.js';
import { measure, medianSample, requireBenchTools, type Measurement } from './lib/measure.js';
import { mib, ratio, table, writeResults } from './lib/results.js';

const run = promisify(execFile);
const REPEAT = Number(process.env.REPEAT ?? 5);
const DRIVER = '/run/opengl-driver/lib';
const cli = join(import.meta.dirname, '..', 'dist', 'cli', 'main.js');

interface Sample {
  readonly m: Measurement;
  readonly growth: number;
}

async function sample(file: string, argv: (copy: string) => string[]): Promise<Sample> {
  const dir = await mkdtemp(join(tmpdir(), 'cuda-patchelf-edit-bench-'));
  try {
    const copy = join(dir, basename(file));
    await copyFile(file, copy);
    await run('sync', []);
    const before = (await stat(copy)).size;
    const m = await measure(argv(copy));
    return { m, growth: (await stat(copy)).size - before };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function repeated(file: string, argv: (copy: string) => string[]): Promise<Sample> {
  const samples: Sample[] = [];
  for (let i = 0; i < REPEAT; i++) samples.push(await sample(file, argv));
  const chosen = medianSample(samples);
  return { m: { ...chosen.m, peakRssKiB: Math.max(...samples.map((s) => s.m.peakRssKiB)) }, growth: chosen.growth };
}

async function main(): Promise<void> {
  await requireBenchTools(['/usr/bin/time', 'patchelf']);
  await run('bash', [join(import.meta.dirname, '..', 'fixtures', 'build.sh'), '--with-large'], { maxBuffer: 64 * 2 ** 20 });
  const manifest = loadManifest();
  const libraries = manifest.fixtures.filter((f) => f.origin === 'cuda' && f.kind === 'shared');
  const rows: string[][] = [];
  for (const lib of libraries) {
    const { stdout } = await run('patchelf', ['--print-rpath', lib.path]);
    const old = stdout.trim();
    const target = old === '' ? DRIVER : `${DRIVER}:${old}`;
    const ours = await repeated(lib.path, (copy) => ['node', cli, 'add-runpath', DRIVER, copy]);
    const theirs = await repeated(lib.path, (copy) => ['patchelf', '--set-rpath', target, copy]);
    const size = (await stat(lib.path)).size;
    rows.push([
      `${lib.arch} ${basename(lib.path)}`,
      mib(size),
      `${(ours.m.wallSeconds * 1000).toFixed(0)} ms`,
      `${(theirs.m.wallSeconds * 1000).toFixed(0)} ms`,
      ratio(theirs.m.wallSeconds, ours.m.wallSeconds),
      `${(ours.m.peakRssKiB / 1024).toFixed(0)} / ${(theirs.m.peakRssKiB / 1024).toFixed(0)}`,
      `${(ours.m.wchar / 1024).toFixed(0)} / ${(theirs.m.wchar / 1024).toFixed(0)}`,
      `${ours.growth} / ${theirs.growth}`,
    ]);
    process.stderr.write(`${rows.at(-1)?.join('  ')}\n`);
  }
  const md = [
    '# Adding the driver directory to one CUDA library: cuda-patchelf vs patchelf',
    '',
    `Each cell: median of ${REPEAT} runs on fresh copies; ${(await run('patchelf', ['--version'])).stdout.trim()}. ` +
      'RSS in MiB, written in KiB (bytes passed to write calls), growth in bytes; "ours / patchelf".',
    '',
    table(['library', 'MiB', 'cuda-patchelf', 'patchelf', 'speed-up', 'peak RSS MiB', 'written KiB', 'growth B'], rows),
  ].join('\n');
  await writeResults('edit-vs-patchelf', md);
}

await main();
