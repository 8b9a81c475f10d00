// A whole tree: `cuda-patchelf apply` with the driver and cuda_compat hooks vs the Nixpkgs sequence
// of patchelf runs, each on a fresh copy (copy time excluded), measured in the same run.
//   npx vite-node bench/apply-vs-nixpkgs.ts
// The tree is real Debian ELF files from this machine's /usr (libraries, programs, the JVM, PostgreSQL,
// Python extensions, LLVM) plus the fixtures' Debian and CUDA 11.8 libraries for amd64 and arm64: at
// least 2,000 of them dynamic.

import { execFile } from 'node:child_process';
import { mkdir, readFile, rm } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { medianSample, requireBenchTools, sampleOnFreshCopies, treeBytes, type TreeSample } from './lib/measure.js';
import { mib, ratio, table, writeResults } from './lib/results.js';

const run = promisify(execFile);
const REPEAT = Number(process.env.REPEAT ?? 3);
const COMPAT = '/nix/store/00000000000000000000000000000000-cuda_compat';
const cache = join(import.meta.dirname, '.cache');
const source = join(cache, 'usr-tree');
const work = join(cache, 'work');
const cli = join(import.meta.dirname, '..', 'dist', 'cli', 'main.js');
const FIXTURES = join(import.meta.dirname, '..', 'fixtures');
const SOURCES = [
  '/usr/lib/x86_64-linux-gnu',
  '/usr/bin',
  '/usr/sbin',
  '/usr/libexec',
  '/usr/lib/gcc',
  '/usr/lib/jvm',
  '/usr/lib/postgresql',
  '/usr/lib/python3.11',
  '/usr/lib/llvm-14',
  join(FIXTURES, '.cache', 'debian'),
  join(FIXTURES, '.cache', 'cuda'),
];

async function assembleTree(): Promise<number> {
  await run('bash', [join(FIXTURES, 'build.sh')], { maxBuffer: 64 * 2 ** 20 });
  await rm(source, { recursive: true, force: true });
  await mkdir(source, { recursive: true });
  for (const dir of SOURCES) await run('cp', ['-a', dir, join(source, dir.replaceAll('/', '_'))]).catch(() => undefined);
  // Debian's /usr is not the same everywhere: the table says how many files this tree had.
  const report = JSON.parse((await run('node', [cli, 'apply', source, '--dry-run', '--json'], { maxBuffer: 512 * 2 ** 20 })).stdout) as {
    summary: { patched: Record<string, number> };
  };
  return Object.values(report.summary.patched).reduce((a, b) => a + b, 0);
}

interface Contender {
  readonly name: string;
  readonly argv: string[];
}

async function runContender(contender: Contender): Promise<TreeSample> {
  return medianSample(await sampleOnFreshCopies(source, work, contender.argv, REPEAT));
}

async function main(): Promise<void> {
  await requireBenchTools(['/usr/bin/time', 'patchelf']);
  const elfFiles = await assembleTree();
  const bytes = await treeBytes(source);
  const contenders: Contender[] = [
    { name: 'cuda-patchelf apply (default jobs)', argv: ['node', cli, 'apply', '{}', '--cuda-compat', COMPAT] },
    { name: 'cuda-patchelf apply --jobs 1', argv: ['node', cli, 'apply', '{}', '--cuda-compat', COMPAT, '--jobs', '1'] },
    { name: 'cuda-patchelf apply --nixpkgs-compat', argv: ['node', cli, 'apply', '{}', '--cuda-compat', COMPAT, '--nixpkgs-compat'] },
    { name: 'Nixpkgs sequence (patchelf)', argv: ['bash', join(import.meta.dirname, 'nixpkgs-sequence.sh'), '{}', COMPAT] },
  ];
  const results = [];
  for (const contender of contenders) {
    const result = await runContender(contender);
    process.stderr.write(`${contender.name}: ${result.m.wallSeconds} s\n`);
    results.push({ contender, ...result });
  }
  const baseline = results.at(-1)?.m.wallSeconds ?? 0;
  const rows = results.map(({ contender, m, growth }) => [
    contender.name,
    `${m.wallSeconds.toFixed(2)} s`,
    `${(elfFiles / m.wallSeconds).toFixed(0)}`,
    ratio(baseline, m.wallSeconds),
    m.cpuCores.toFixed(2),
    mib(m.wchar),
    mib(growth),
    (m.peakRssKiB / 1024).toFixed(0),
  ]);
  const patchelfVersion = (await run('patchelf', ['--version'])).stdout.trim();
  const md = [
    '# apply on a tree of real ELF files vs the Nixpkgs patchelf sequence',
    '',
    `Tree: ${elfFiles} dynamic ELF files, ${mib(bytes)} MiB (Debian's /usr on this machine and the CUDA/Debian fixtures); ${availableParallelism()} CPUs; ` +
      `${patchelfVersion}; median of ${REPEAT} runs, each on a fresh copy.`,
    '',
    table(['contender', 'wall', 'ELF files/s', 'vs Nixpkgs', 'CPU cores used', 'written MiB', 'tree growth MiB', 'peak RSS MiB'], rows),
    '',
    (await readFile(join(import.meta.dirname, 'nixpkgs-sequence.sh'), 'utf8'))
      .split('\n')
      .filter((l) => l.startsWith('# '))
      .map((l) => `> ${l.slice(2)}`)
      .join('\n'),
  ].join('\n');
  await writeResults('apply-vs-nixpkgs', md);
  await rm(work, { recursive: true, force: true });
}

await main();
