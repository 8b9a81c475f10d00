// The closure benchmark: cuda-patchelf apply (driver + cuda_compat hooks) against the Nixpkgs patchelf
// sequence, a find | xargs patchelf one-liner and the I/O floor, on a closure of thousands of real
// Debian and CUDA ELF files (bench/closure-packages.lock), each contender repeated on fresh copies.
//   npm run bench:closure [-- --quick]     REPEAT=n, PATCHELF=/path/to/patchelf|none, BENCH_RUN=label
// Writes bench/results/<date>-<machine>.md and .svg (--quick: bench/.cache/closure/results/).

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { cpus, hostname, loadavg, release, totalmem } from 'node:os';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { summarizeCpuProfile } from './lib/cpu-profile.js';
import { measure, requireBenchTools, sampleOnFreshCopies, freshCopy } from './lib/measure.js';
import { hookBenchmarks, plannerBenchmarks, readerBenchmarks } from './lib/micro-benchmarks.js';
import { RESULTS_DIR, resultsFile, writeResults } from './lib/results.js';
import { measureGrowth } from './lib/tree-growth.js';
import { assembleTree, CLOSURE_CACHE } from './closure/assemble-tree.js';
import { takeCensus, type Census } from './closure/census.js';
import { contenders, type Contender, type ContenderTools } from './closure/contenders.js';
import { renderChart, renderReport, type ContenderResult, type ReportInput } from './closure/report.js';

const run = promisify(execFile);
const QUICK = process.argv.includes('--quick');
const REPEAT = Number(process.env.REPEAT ?? (QUICK ? 1 : 3));
const CUDA_COMPAT = '/nix/store/00000000000000000000000000000000-cuda_compat';
const repoRoot = join(import.meta.dirname, '..');
const cli = join(repoRoot, 'dist', 'cli', 'main.js');
const cache = CLOSURE_CACHE;
const work = join(cache, 'work');
/** The outputs --quick measures: a few hundred files of every kind, a few hundred MB. */
const QUICK_OUTPUTS = [
  'amd64/coreutils',
  'arm64/coreutils',
  'amd64/libcublas11',
  'arm64/libnvrtc11.2',
  'amd64/python3-numpy',
  'arm64/vlc-plugin-base',
  'amd64/libcuda1',
];

const say = (line: string): void => void process.stderr.write(`bench-closure: ${line}\n`);

async function assemble(): Promise<string> {
  const tree = await assembleTree();
  if (!QUICK) return tree;
  // Hard links into the full tree: no copy; the benchmark only ever patches fresh copies of it.
  const quick = join(cache, 'quick-tree');
  await rm(quick, { recursive: true, force: true });
  for (const output of QUICK_OUTPUTS) {
    await mkdir(join(quick, output, '..'), { recursive: true });
    await run('cp', ['-al', join(tree, output), join(quick, output)]);
  }
  return quick;
}

async function patchelfs(): Promise<{ path: string; version: string }[]> {
  const other = process.env.PATCHELF ?? join(cache, 'patchelf-0.18', 'bin', 'patchelf');
  const paths = ['/usr/bin/patchelf', ...(other !== 'none' && existsSync(other) ? [other] : [])];
  return Promise.all(paths.map(async (path) => ({ path, version: (await run(path, ['--version'])).stdout.trim() })));
}

async function runContender(source: string, contender: Contender): Promise<ContenderResult> {
  say(`${contender.name}: ${REPEAT} run(s)`);
  const samples = await sampleOnFreshCopies(source, work, contender.argv, REPEAT, contender.env);
  say(`  wall ${samples.map((s) => s.m.wallSeconds.toFixed(2)).join(', ')} s`);
  const growth = await measureGrowth(source, work);
  let check: string | undefined;
  if (contender.group === 'a') {
    check = await run('node', [cli, 'check', work, '--cuda-compat', CUDA_COMPAT], { maxBuffer: 256 * 2 ** 20 }).then(
      () => 'nothing left to do',
      (error: { stdout?: string }) => `**files left to do**: ${(error.stdout ?? '').split('\n').slice(0, 5).join(' ')}`,
    );
  }
  await rm(work, { recursive: true, force: true });
  return { contender, samples, growth, ...(check === undefined ? {} : { check }) };
}

/** One apply --jobs 1 under the V8 profiler, on a fresh copy. */
async function profileApply(source: string): Promise<ReportInput['profile']> {
  const dir = join(cache, 'profile');
  await rm(dir, { recursive: true, force: true });
  await freshCopy(source, work);
  const m = await measure(['node', '--cpu-prof', `--cpu-prof-dir=${dir}`, cli, 'apply', work, '--cuda-compat', CUDA_COMPAT, '--jobs', '1']);
  await rm(work, { recursive: true, force: true });
  const [file] = (await readdir(dir)).filter((f) => f.endsWith('.cpuprofile'));
  if (file === undefined) return null;
  return { summary: await summarizeCpuProfile(join(dir, file), repoRoot), wallSeconds: m.wallSeconds };
}

async function microBenchmarks(census: Census): Promise<ReportInput['micro']> {
  const libraries = census.amd64Libraries;
  const small = libraries.reduce((best, lib) => (Math.abs(lib.size - 10 * 1024) < Math.abs(best.size - 10 * 1024) ? lib : best));
  const middle = libraries[Math.floor(libraries.length / 2)];
  const largest = libraries.at(-1);
  const planned = [small, middle, largest].filter((lib) => lib !== undefined).map((lib) => lib.path);
  return [
    ...(await readerBenchmarks(small.path)),
    ...(await plannerBenchmarks(planned, CUDA_COMPAT)),
    ...(await hookBenchmarks(CUDA_COMPAT)),
  ];
}

/** The machine, and the commit of the checkout when the run started. */
async function machine(): Promise<string> {
  const cpu = cpus();
  const commit = (await run('git', ['-C', repoRoot, 'describe', '--always', '--dirty'])).stdout.trim();
  return `${hostname()}: ${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Linux ${release()}, Node ${process.version}; cuda-patchelf ${commit}`;
}

async function main(): Promise<void> {
  await requireBenchTools(['/usr/bin/time', 'patchelf', 'gcc', 'find', 'xargs', 'flock']);
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run npm run build first`);
  const start = { at: new Date(), load: loadavg() };
  const machineLine = await machine();
  const source = await assemble();
  say('census (apply --dry-run)');
  const census = await takeCensus(source, cli, ['--cuda-compat', CUDA_COMPAT]);
  say(`${census.dynamicElf} dynamic ELF files, ${census.elfPaths.length} ELF files, ${(census.bytes / 1e9).toFixed(2)} GB`);
  const elfList = join(cache, 'elf-files.list');
  await writeFile(elfList, census.elfPaths.map((p) => `${p}\0`).join(''));
  const tools: ContenderTools = {
    cli,
    cudaCompat: CUDA_COMPAT,
    patchelfs: await patchelfs(),
    readHeads: join(cache, 'tools', 'read-heads'),
    elfList,
  };
  const results: ContenderResult[] = [];
  for (const contender of contenders(tools)) results.push(await runContender(source, contender));
  say('profiling one apply run');
  const profile = await profileApply(source);
  say('micro-benchmarks');
  const micro = await microBenchmarks(census);
  const machineName = hostname().replace(/[^A-Za-z0-9.-]/g, '_');
  const dir = QUICK ? join(cache, 'results') : RESULTS_DIR;
  const chart = resultsFile(machineName, 'svg', dir);
  const label = process.env.BENCH_RUN ?? (QUICK ? 'quick run (--quick: a few outputs of the closure)' : 'full run');
  const input: ReportInput = {
    run: { label, repeat: REPEAT, machine: machineLine, start, end: { at: new Date(), load: loadavg() } },
    census,
    results,
    profile,
    micro,
    chartFile: basename(chart),
  };
  await mkdir(dir, { recursive: true });
  await writeFile(chart, renderChart(input, 'cuda-patchelf apply vs patchelf vs the I/O floor'));
  await writeResults(machineName, renderReport(input), dir);
}

await main();
