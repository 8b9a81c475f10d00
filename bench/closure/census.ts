// What the closure is made of, found before any timing: its outputs, files and bytes, and what
// `apply --dry-run` would do to each file (which also says which files are ELF).

import { execFile } from 'node:child_process';
import { readdir, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { treeBytes } from '../lib/measure.js';

const run = promisify(execFile);

/** apply's skip reasons that still mean "an ELF file". */
const ELF_SKIPS = new Set(['static', 'static-pie', 'relocatable', 'core']);

export interface Census {
  readonly outputs: number;
  readonly regularFiles: number;
  readonly symlinks: number;
  readonly bytes: number;
  /** ELF files with a dynamic section: the files apply (and Nixpkgs) patch. */
  readonly dynamicElf: number;
  /** Every ELF file (static programs, objects... too), relative to the tree. */
  readonly elfPaths: readonly string[];
  /** What apply --dry-run would do: tier → files. */
  readonly tiers: Readonly<Record<string, number>>;
  readonly unchanged: number;
  /** Dynamic ELF x86_64 libraries (amd64 outputs), smallest first, with their sizes. */
  readonly amd64Libraries: readonly { readonly path: string; readonly size: number }[];
}

interface DryRunReport {
  /** Report version 3: a dry run counts what it would patch, by tier, as `wouldPatch`. */
  summary: { wouldPatch: Record<string, number>; unchanged: number };
  files: { path: string; status: string; reason?: string }[];
}

async function count(dir: string, type: 'f' | 'l'): Promise<number> {
  const { stdout } = await run('find', [dir, '-type', type, '-printf', '.'], { maxBuffer: 64 * 2 ** 20 });
  return stdout.length;
}

/** `tree/<arch>/<output>/`: the outputs are the second level. */
async function countOutputs(tree: string): Promise<number> {
  const arches = await readdir(tree, { withFileTypes: true });
  const counts = await Promise.all(arches.filter((a) => a.isDirectory()).map(async (a) => (await readdir(join(tree, a.name))).length));
  return counts.reduce((a, b) => a + b, 0);
}

export async function takeCensus(tree: string, cli: string, applyArgs: readonly string[]): Promise<Census> {
  const { stdout } = await run('node', [cli, 'apply', tree, ...applyArgs, '--dry-run', '--json'], { maxBuffer: 1024 * 2 ** 20 });
  const report = JSON.parse(stdout) as DryRunReport;
  // A dry run's report (version 3) says `would-patch` where apply says `patched`, and `would-refuse`
  // for a file to patch that apply would refuse (read-only): dynamic ELF files all three.
  const dynamic = report.files.filter((f) => f.status === 'would-patch' || f.status === 'would-refuse' || f.status === 'unchanged');
  const elf = [...dynamic, ...report.files.filter((f) => f.status === 'skipped' && ELF_SKIPS.has(f.reason ?? ''))];
  const amd64 = dynamic.filter((f) => relative(tree, f.path).startsWith('amd64/') && /\.so(\.|$)/.test(f.path));
  const amd64Libraries = (await Promise.all(amd64.map(async (f) => ({ path: f.path, size: (await stat(f.path)).size })))).sort(
    (a, b) => a.size - b.size,
  );
  return {
    outputs: await countOutputs(tree),
    regularFiles: await count(tree, 'f'),
    symlinks: await count(tree, 'l'),
    bytes: await treeBytes(tree),
    dynamicElf: dynamic.length,
    elfPaths: elf.map((f) => relative(tree, f.path)),
    tiers: report.summary.wouldPatch,
    unchanged: report.summary.unchanged,
    amd64Libraries,
  };
}
