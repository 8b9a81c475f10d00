// The closure benchmark's results file: the table, the ratios of (a) against (b), (c) and (d), the
// targets met or missed (and by how much), the per-file growth, where the time goes, the
// micro-benchmarks, and the SVG chart next to it.

import type { ProfileSummary, SelfTime } from '../lib/cpu-profile.js';
import { spread, type TreeSample } from '../lib/measure.js';
import type { MicroRow } from '../lib/micro-benchmarks.js';
import { mib, table } from '../lib/results.js';
import { barChartSvg, type Bar } from '../lib/svg-chart.js';
import { GROWTH_SLACK_BYTES, type GrowthReport } from '../lib/tree-growth.js';
import type { Census } from './census.js';
import type { Contender } from './contenders.js';

export interface ContenderResult {
  readonly contender: Contender;
  readonly samples: readonly TreeSample[];
  readonly growth: GrowthReport;
  /** For (a): what `cuda-patchelf check` said about the result. */
  readonly check?: string;
}

/** The machine at one moment of the run: the time, and its load average (1, 5, 15 min). */
export interface Moment {
  readonly at: Date;
  readonly load: readonly number[];
}

export interface RunInfo {
  readonly label: string;
  readonly repeat: number;
  readonly machine: string;
  readonly start: Moment;
  readonly end: Moment;
}

export interface ReportInput {
  readonly run: RunInfo;
  readonly census: Census;
  readonly results: readonly ContenderResult[];
  readonly profile: { readonly summary: ProfileSummary; readonly wallSeconds: number } | null;
  readonly micro: readonly MicroRow[];
  readonly chartFile: string;
}

const TARGETS = { vsNixpkgs: 50, vsXargs: 10, vsFloor: 3, writtenShare: 0.01, rssMiB: 256 } as const;

const seconds = (s: number): string => (s >= 10 ? `${s.toFixed(1)} s` : s >= 1 ? `${s.toFixed(2)} s` : `${(s * 1000).toFixed(0)} ms`);
const times = (x: number): string => `${x >= 10 ? x.toFixed(0) : x.toFixed(1)}×`;
const gb = (bytes: number): string => `${(bytes / 1e9).toFixed(2)} GB`;
const wall = (r: ContenderResult) => spread(r.samples.map((s) => s.m.wallSeconds));
const med = (r: ContenderResult, pick: (s: TreeSample) => number): number => spread(r.samples.map(pick)).median;
const peakRssMiB = (r: ContenderResult): number => Math.max(...r.samples.map((s) => s.m.peakRssKiB)) / 1024;

function resultTable(input: ReportInput): string {
  const files = input.census.dynamicElf;
  const rows = input.results.map((r) => {
    const w = wall(r);
    return [
      r.contender.name,
      seconds(w.median),
      `${seconds(w.min)} – ${seconds(w.max)}`,
      (files / w.median).toFixed(0),
      med(r, (s) => s.m.cpuCores).toFixed(2),
      mib(med(r, (s) => s.m.writeBytes)),
      mib(med(r, (s) => s.m.wchar)),
      mib(med(r, (s) => s.growth)),
      peakRssMiB(r).toFixed(0),
    ];
  });
  return table(
    [
      'contender',
      'wall (median)',
      'min – max',
      'ELF files/s',
      'CPU cores',
      'written MiB (write_bytes)',
      'write() MiB (wchar)',
      'tree growth MiB',
      'peak RSS MiB',
    ],
    rows,
  );
}

function ratioTable(input: ReportInput): string {
  const ours = input.results.filter((r) => r.contender.group === 'a');
  const others = input.results.filter((r) => r.contender.group !== 'a');
  const rows = ours.map((a) => [
    a.contender.name,
    ...others.map((o) => {
      const x = wall(o).median / wall(a).median;
      return o.contender.group === 'd' ? `${times(1 / x)} the floor's time` : `${times(x)} faster`;
    }),
  ]);
  return table(['', ...others.map((o) => `vs ${o.contender.name}`)], rows);
}

interface TargetRow {
  readonly target: string;
  readonly cells: readonly string[];
}

/** "met" or "missed by …": `value` against `goal`, where larger is better when `atLeast`. */
function verdict(
  value: number,
  goal: number,
  atLeast: boolean,
  show: (v: number) => string,
  short: (value: number, goal: number) => string,
): string {
  const met = atLeast ? value >= goal : value <= goal;
  return met ? `met: ${show(value)}` : `**missed**: ${show(value)}, ${short(value, goal)}`;
}

function targetRows(input: ReportInput): { header: string[]; rows: TargetRow[] } {
  const ours = input.results.filter((r) => r.contender.group === 'a');
  const best = (group: 'b' | 'c' | 'd'): ContenderResult | undefined =>
    input.results.filter((r) => r.contender.group === group).sort((x, y) => wall(x).median - wall(y).median)[0];
  const [b, c, d] = [best('b'), best('c'), best('d')];
  const factor = (value: number, goal: number): string => `${times(goal / value)} short`;
  const over = (value: number, goal: number): string => `${times(value / goal)} over`;
  const rows: TargetRow[] = [];
  if (b !== undefined) {
    rows.push({
      target: `≥ ${TARGETS.vsNixpkgs}× faster than (b)`,
      cells: ours.map((a) => verdict(wall(b).median / wall(a).median, TARGETS.vsNixpkgs, true, times, factor)),
    });
  }
  if (c !== undefined) {
    rows.push({
      target: `≥ ${TARGETS.vsXargs}× faster than (c)`,
      cells: ours.map((a) => verdict(wall(c).median / wall(a).median, TARGETS.vsXargs, true, times, factor)),
    });
  }
  if (d !== undefined) {
    rows.push({
      target: `within ${TARGETS.vsFloor}× of (d), the floor`,
      cells: ours.map((a) => verdict(wall(a).median / wall(d).median, TARGETS.vsFloor, false, (x) => `${times(x)} the floor`, over)),
    });
  }
  const limit = TARGETS.writtenShare * input.census.bytes;
  const share = (v: number): string => `${mib(v)} MiB (${((v / input.census.bytes) * 100).toFixed(3)}%)`;
  for (const [what, pick] of [
    ['write_bytes', (s: TreeSample) => s.m.writeBytes],
    ['wchar', (s: TreeSample) => s.m.wchar],
  ] as const) {
    rows.push({
      target: `bytes written (${what}) ≤ 1% of the closure (${mib(limit)} MiB)`,
      cells: ours.map((a) => verdict(med(a, pick), limit, false, share, (v, g) => `${mib(v - g)} MiB over`)),
    });
  }
  rows.push({
    target: `growth per file ≤ copied tables + ${GROWTH_SLACK_BYTES} B`,
    cells: ours.map((a) =>
      a.growth.overSlack.length === 0
        ? `met: ${a.growth.filesGrown} files grew, none by more than their copied tables + ${GROWTH_SLACK_BYTES} B (largest excess ${a.growth.largestExcess} B)`
        : `**missed**: ${a.growth.overSlack.length} of ${a.growth.filesGrown} grown files, up to ${a.growth.largestExcess - GROWTH_SLACK_BYTES} B over (e.g. ${a.growth.overSlack[0]?.relativePath})`,
    ),
  });
  rows.push({
    target: `peak RSS ≤ ${TARGETS.rssMiB} MiB`,
    cells: ours.map((a) =>
      verdict(
        peakRssMiB(a),
        TARGETS.rssMiB,
        false,
        (v) => `${v.toFixed(0)} MiB`,
        (v, g) => `${(v - g).toFixed(0)} MiB over`,
      ),
    ),
  });
  return { header: ['target', ...ours.map((a) => a.contender.name)], rows };
}

function growthTable(input: ReportInput): string {
  const rows = input.results
    .filter((r) => r.contender.group !== 'd')
    .map((r) => [
      r.contender.name,
      String(r.growth.filesGrown),
      mib(r.growth.totalGrowth),
      String(r.growth.largestGrowth),
      String(r.growth.overSlack.length),
      String(r.growth.largestExcess),
    ]);
  return table(
    ['contender', 'files grown', 'growth MiB', 'largest growth B', `files over tables + ${GROWTH_SLACK_BYTES} B`, 'largest excess B'],
    rows,
  );
}

function selfTimeTable(entries: readonly SelfTime[], what: string): string {
  return table(
    [what, 'self time', 'share'],
    entries.map((e) => [`\`${e.name}\``, `${(e.micros / 1000).toFixed(0)} ms`, `${(e.share * 100).toFixed(1)}%`]),
  );
}

function profileSection(input: ReportInput): string[] {
  if (input.profile === null) return [];
  const { summary, wallSeconds } = input.profile;
  return [
    '## Where the time goes',
    '',
    `One \`apply --jobs 1\` run under \`node --cpu-prof\` on a fresh copy (${seconds(wallSeconds)} wall with the profiler, ` +
      `${(summary.totalMicros / 1e6).toFixed(2)} s sampled). Self time by part of the program, then the top functions. ` +
      '`(idle)` is the main thread waiting (for the file system, or between files); `(program)` is V8 and Node work outside JavaScript; ' +
      'native calls (`lstat`, `read`, `open`...) are named with the caller in this project that made them.',
    '',
    selfTimeTable(summary.parts, 'part'),
    '',
    selfTimeTable(summary.functions, 'function'),
    '',
  ];
}

function microTable(rows: readonly MicroRow[]): string {
  return table(
    ['benchmark', 'case', 'mean µs', 'p99 µs', 'samples', ''],
    rows.map((r) => [r.group, r.name, r.meanMicros.toFixed(2), r.p99Micros.toFixed(2), String(r.samples), r.note]),
  );
}

export function renderReport(input: ReportInput): string {
  const { census, run } = input;
  const targets = targetRows(input);
  const load = (l: readonly number[]): string => l.map((x) => x.toFixed(2)).join(' ');
  return [
    `# cuda-patchelf on a ${gb(census.bytes)} closure of ${census.dynamicElf} dynamic ELF files: apply vs patchelf vs the I/O floor`,
    '',
    `**Run:** ${run.label}; ${run.repeat} run${run.repeat === 1 ? '' : 's'} per contender, each on a fresh copy of the closure (copy time excluded). ` +
      `Load average (1, 5, 15 min) before: ${load(run.start.load)}, after: ${load(run.end.load)}; ` +
      `${run.start.at.toISOString()} – ${run.end.at.toISOString()}.`,
    '',
    `**Machine:** ${run.machine}.`,
    '',
    `**Closure** (bench/closure-packages.lock, Debian 12 amd64 + arm64 packages and the CUDA 11.8 libraries of Debian's non-free, laid out as build outputs): ` +
      `${census.outputs} outputs, ${census.regularFiles} regular files and ${census.symlinks} symlinks, ${gb(census.bytes)}; ` +
      `${census.elfPaths.length} ELF files, ${census.dynamicElf} of them dynamic (what apply and Nixpkgs patch). ` +
      `apply's edit tiers: ${Object.entries(census.tiers)
        .map(([tier, n]) => `${n} ${tier}`)
        .join(', ')}, ${census.unchanged} unchanged.`,
    '',
    `![wall time, bytes written and peak RSS per contender](${input.chartFile})`,
    '',
    resultTable(input),
    '',
    'ELF files/s: dynamic ELF files of the closure / median wall time. Written: `write_bytes` of the whole process tree from /proc ' +
      '(page-cache pages dirtied, what reaches the disk, including the inode blocks that atime updates dirty on a just-copied tree: ' +
      '(d) calls no write at all); wchar: bytes passed to write calls. Peak RSS: the largest single process (GNU time).',
    '',
    '## Ratios',
    '',
    ratioTable(input),
    '',
    '## Targets',
    '',
    table(
      targets.header,
      targets.rows.map((r) => [r.target, ...r.cells]),
    ),
    '',
    '(b): the faster of its patchelfs; (c) and (d) as above. The issue counts bytes written as write_bytes; on kernels whose page cache ' +
      'uses large folios (ext4 since Linux 6.16), write_bytes counts each folio dirtied whole: one byte written into a file that `cp` has just ' +
      'written counts as 64 KiB or more. For edits of a few hundred bytes per file, wchar (the bytes passed to write calls) is what the tool ' +
      'writes; both are shown.',
    '',
    '## Growth per file',
    '',
    "Each grown file's growth against the copied tables: the bytes past its old end that hold a structure (a section such as the new .dynstr, " +
      'the program or section header table, the dynamic, interpreter or note segment), read back from the patched file; what is left is padding. ' +
      `The target allows ${GROWTH_SLACK_BYTES} bytes of it per file.`,
    '',
    growthTable(input),
    '',
    ...input.results
      .filter((r) => r.check !== undefined)
      .map((r) => `- ${r.contender.name}: \`cuda-patchelf check\` afterwards: ${r.check}`),
    '',
    ...profileSection(input),
    '## Micro-benchmarks (tinybench)',
    '',
    microTable(input.micro),
    '',
    '## What each contender runs',
    '',
    ...input.results.map((r) => `- ${r.contender.name}: ${r.contender.runs}`),
    '',
    'Reproduce: `npm run bench:closure` (assembles the closure into bench/.cache/closure/ on first use: ~1.6 GB downloaded, ~6 GB unpacked, ' +
      'plus a working copy of the same size while it runs). `REPEAT=n` sets the runs per contender; `PATCHELF=/path/to/patchelf` replaces the second ' +
      "patchelf (`PATCHELF=none`: Debian's only); `npm run bench:closure -- --quick` measures a small part of the closure once.",
  ].join('\n');
}

export function renderChart(input: ReportInput, title: string): string {
  const bar = (r: ContenderResult, value: number, range?: { min: number; max: number }): Bar => ({
    label: r.contender.short,
    value,
    ...range,
    accent: r.contender.group === 'a',
  });
  const short = (v: number): string => (v >= 10 ? v.toFixed(0) : v >= 1 ? v.toFixed(1) : v.toPrecision(1));
  return barChartSvg(
    title,
    `${input.run.label}; ${input.census.dynamicElf} dynamic ELF files, ${gb(input.census.bytes)}; median of ${input.run.repeat}, whiskers: min–max`,
    [
      { title: 'Wall time (s, log scale)', scale: 'log', format: short, bars: input.results.map((r) => bar(r, wall(r).median, wall(r))) },
      // A floor of 0.01 MiB keeps a contender that wrote nothing on the log scale.
      {
        title: 'Written to storage (MiB of write_bytes, log scale)',
        scale: 'log',
        format: short,
        bars: input.results.map((r) => bar(r, Math.max(med(r, (s) => s.m.writeBytes) / 2 ** 20, 0.01))),
      },
      { title: 'Peak RSS (MiB)', scale: 'linear', format: (v) => v.toFixed(0), bars: input.results.map((r) => bar(r, peakRssMiB(r))) },
    ],
  );
}
