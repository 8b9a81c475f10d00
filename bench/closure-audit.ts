// Does every file `apply` patches in the closure still load, and is it still well formed? `apply`
// (driver, cuda_compat and stubs hooks) on a copy of the closure benchmark's tree, then every file it
// reports patched, original against patched copy, through tools that are not ours:
// - the loader, as ldd runs it (LD_TRACE_LOADED_OBJECTS=1, which lists every library it would load
//   and says `not found` for one missing here instead of stopping there as `ld.so --list` does): the
//   host's for x86_64 files, qemu-aarch64 with the cross sysroot's for aarch64 files (files for other
//   machines skip this check), no LD_LIBRARY_PATH;
//   the two outputs must be the same once load addresses and the two trees' roots are masked (the
//   runpath's new directories do not exist here, so nothing that resolved before may resolve
//   elsewhere, and nothing may stop resolving);
// - `eu-elflint --gnu-ld`: no complaint about the patched file that the original did not get;
// - `readelf -dW`: no warning the original did not get, and the runpath it shows is the one `apply`
//   reported (DT_RUNPATH, or DT_RPATH where the file had that).
// Then `check` on the patched copy must find nothing left to do.
//
//   npx vite-node bench/closure-audit.ts [--tree DIR] [--jobs N] [--only PREFIX] [--nixpkgs-compat]
//
// `npm run build` first. DIR is another tree to audit instead of the closure (a copy of /usr, say);
// PREFIX limits the audit to files under DIR/PREFIX (amd64/coreutils, say); --nixpkgs-compat is
// passed on to apply and check.
// Writes bench/results/<date>-<machine>-<closure or DIR's name>-audit[-nixpkgs-compat].md; the copy
// is left in bench/.cache/audit.

import { execFile } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import { availableParallelism, hostname } from 'node:os';
import { basename, join, relative, resolve } from 'node:path';
import pLimit from 'p-limit';
import { freshCopy } from './lib/measure.js';
import { table, writeResults } from './lib/results.js';
import { assembleTree, CLOSURE_CACHE } from './closure/assemble-tree.js';

const CUDA_COMPAT = '/nix/store/00000000000000000000000000000000-cuda_compat';
const cli = join(import.meta.dirname, '..', 'dist', 'cli', 'main.js');
const argument = (name: string): string | undefined => {
  const at = process.argv.indexOf(name);
  return at < 0 ? undefined : process.argv[at + 1];
};
const jobs = Number(argument('--jobs') ?? availableParallelism());
const only = argument('--only');
/** A tool that runs this long on one file is recorded as timed out, not waited for. */
const TOOL_TIMEOUT_MS = 600_000;
const AARCH64_SYSROOT = '/usr/aarch64-linux-gnu';
const say = (line: string): void => void process.stderr.write(`closure-audit: ${line}\n`);

interface ToolRun {
  /** The exit code, or how the tool ended without one: `timed out`, or the signal that killed it. */
  readonly code: number | string;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs a tool to its end whatever its exit code, with no LD_LIBRARY_PATH and a plain PATH. A tool that
 * times out or dies by a signal is a result (the audit reports it); one that cannot be started (not
 * installed) stops the audit, so that a missing tool never reads as a clean file.
 */
function runTool(file: string, args: readonly string[], extraEnv: Record<string, string> = {}): Promise<ToolRun> {
  return new Promise((resolve, reject) => {
    const env = { PATH: '/usr/bin:/bin', LC_ALL: 'C', ...extraEnv };
    execFile(file, args, { env, maxBuffer: 256 * 2 ** 20, timeout: TOOL_TIMEOUT_MS }, (error, stdout, stderr) => {
      if (error === null) return resolve({ code: 0, stdout, stderr });
      if (typeof error.code === 'number') return resolve({ code: error.code, stdout, stderr });
      if (error.killed) return resolve({ code: 'timed out', stdout, stderr });
      if (error.signal !== null && error.signal !== undefined) return resolve({ code: error.signal, stdout, stderr });
      reject(error);
    });
  });
}

/** Whether a tool ran to an exit code of its own. */
const ranToItsEnd = (run: ToolRun): boolean => typeof run.code === 'number';

interface PatchedFile {
  readonly path: string;
  readonly newRunpath: string;
}

interface Finding {
  readonly file: string;
  readonly check: 'tool' | 'loader' | 'eu-elflint' | 'readelf' | 'runpath';
  readonly detail: string;
}

const EM_X86_64 = 62;
const EM_AARCH64 = 183;

/** e_machine, at offset 18 of the ELF header in both classes, in the file's byte order. */
async function machineOf(file: string): Promise<number> {
  const handle = await open(file, 'r');
  try {
    const head = Buffer.alloc(20);
    await handle.read(head, 0, head.length, 0);
    return head[5] === 2 ? head.readUInt16BE(18) : head.readUInt16LE(18);
  } finally {
    await handle.close();
  }
}

/**
 * The loader listing what `file` loads, or null for a machine this one has no loader for. qemu sets
 * the variable for the emulated loader, not for itself.
 */
function listLoaded(file: string, machine: number): Promise<ToolRun> | null {
  if (machine === EM_AARCH64) {
    return runTool('/usr/bin/qemu-aarch64', [
      '-L',
      AARCH64_SYSROOT,
      '-E',
      'LD_TRACE_LOADED_OBJECTS=1',
      join(AARCH64_SYSROOT, 'lib', 'ld-linux-aarch64.so.1'),
      file,
    ]);
  }
  if (machine === EM_X86_64) return runTool('/lib64/ld-linux-x86-64.so.2', [file], { LD_TRACE_LOADED_OBJECTS: '1' });
  return null;
}

/** Text with a tree's root written as `<tree>`, so that the same file in two trees reads the same. */
const maskRoot = (text: string, tree: string): string => text.replaceAll(`${tree}/`, '<tree>/');

/** A tool's exit and output with the tree's root and load addresses masked. */
function masked(run: ToolRun, tree: string): string {
  return maskRoot(`exit ${run.code}\n${run.stdout}${run.stderr}`, tree).replace(/\(0x[0-9a-f]+\)/g, '(address)');
}

/** The lines of `after` that `before` does not have, counting repeats. */
function newLines(before: string, after: string): string[] {
  const seen = new Map<string, number>();
  for (const line of before.split('\n')) seen.set(line, (seen.get(line) ?? 0) + 1);
  return after.split('\n').filter((line) => {
    const count = seen.get(line) ?? 0;
    seen.set(line, count - 1);
    return count <= 0 && line.trim() !== '';
  });
}

/** What `readelf -dW` shows as the runpath: DT_RUNPATH, else DT_RPATH, else null. */
function readelfRunpath(stdout: string): string | null {
  const runpath = /Library runpath: \[(.*)\]/.exec(stdout);
  const rpath = /Library rpath: \[(.*)\]/.exec(stdout);
  return runpath?.[1] ?? rpath?.[1] ?? null;
}

interface FileAudit {
  readonly findings: readonly Finding[];
  readonly machine: number;
  /**
   * The loader listed the file before and after (exit 0), or could not (a failure, the same both times
   * unless a finding says otherwise), or there is no loader here for its machine.
   */
  readonly loader: 'listed' | 'not listed' | 'no loader';
  /** Listed, with every library found before and after: the comparison covered them all. */
  readonly everyLibraryFound: boolean;
}

async function auditFile(original: string, patched: PatchedFile, pristineTree: string, auditTree: string): Promise<FileAudit> {
  const findings: Finding[] = [];
  const file = relative(auditTree, patched.path);
  const machine = await machineOf(original);
  const [loaderBefore, loaderAfter] = await Promise.all([listLoaded(original, machine), listLoaded(patched.path, machine)]);
  const [lintBefore, lintAfter] = await Promise.all([
    runTool('/usr/bin/eu-elflint', ['--gnu-ld', original]),
    runTool('/usr/bin/eu-elflint', ['--gnu-ld', patched.path]),
  ]);
  const [readelfBefore, readelfAfter] = await Promise.all([
    runTool('/usr/bin/readelf', ['-dW', original]),
    runTool('/usr/bin/readelf', ['-dW', patched.path]),
  ]);
  const runs: [string, ToolRun | null][] = [
    ['the loader, before', loaderBefore],
    ['the loader, after', loaderAfter],
    ['eu-elflint, before', lintBefore],
    ['eu-elflint, after', lintAfter],
    ['readelf, before', readelfBefore],
    ['readelf, after', readelfAfter],
  ];
  for (const [what, run] of runs)
    if (run !== null && !ranToItsEnd(run)) findings.push({ file, check: 'tool', detail: `${what}: ${run.code}` });
  if (loaderBefore !== null && loaderAfter !== null && masked(loaderBefore, pristineTree) !== masked(loaderAfter, auditTree)) {
    findings.push({
      file,
      check: 'loader',
      detail: `before:\n${masked(loaderBefore, pristineTree)}\nafter:\n${masked(loaderAfter, auditTree)}`,
    });
  }
  const lint = newLines(masked(lintBefore, pristineTree), masked(lintAfter, auditTree));
  if (lint.length > 0) findings.push({ file, check: 'eu-elflint', detail: lint.join('\n') });
  const warnings = newLines(maskRoot(readelfBefore.stderr, pristineTree), maskRoot(readelfAfter.stderr, auditTree));
  if (warnings.length > 0) findings.push({ file, check: 'readelf', detail: warnings.join('\n') });
  const shown = readelfRunpath(readelfAfter.stdout);
  if (shown !== patched.newRunpath)
    findings.push({
      file,
      check: 'runpath',
      detail: `readelf shows ${JSON.stringify(shown)}, apply reported ${JSON.stringify(patched.newRunpath)}`,
    });
  const loader =
    loaderBefore === null || loaderAfter === null
      ? 'no loader'
      : loaderBefore.code === 0 && loaderAfter.code === 0
        ? 'listed'
        : 'not listed';
  const everyLibraryFound = loader === 'listed' && !`${loaderBefore?.stdout}${loaderAfter?.stdout}`.includes('not found');
  return { findings, machine, loader, everyLibraryFound };
}

interface ApplyReport {
  readonly summary: { readonly patched: Record<string, number>; readonly failed: number };
  readonly files: readonly { readonly path: string; readonly status: string; readonly newRunpath?: string }[];
}

async function main(): Promise<void> {
  if (!existsSync(cli)) throw new Error(`${cli} is missing: run npm run build first`);
  const treeArgument = argument('--tree');
  const pristine = treeArgument === undefined ? await assembleTree() : resolve(treeArgument);
  const treeName = treeArgument === undefined ? 'closure' : basename(pristine);
  const auditTree = join(CLOSURE_CACHE, '..', 'audit');
  // The copy replaces the audit tree: neither may hold the other (compared as real paths).
  await mkdir(auditTree, { recursive: true });
  const within = (outer: string, inner: string): boolean => !relative(outer, inner).startsWith('..');
  const [realTree, realAudit] = [realpathSync(pristine), realpathSync(auditTree)];
  if (within(realTree, realAudit) || within(realAudit, realTree)) throw new Error(`--tree ${pristine} holds ${auditTree}, or lies in it`);
  say(`copying ${pristine} to ${auditTree}`);
  await freshCopy(pristine, auditTree);
  const nixpkgsCompat = process.argv.includes('--nixpkgs-compat');
  const hooks = ['--cuda-compat', CUDA_COMPAT, '--remove-stubs', ...(nixpkgsCompat ? ['--nixpkgs-compat'] : [])];
  say(`apply ${hooks.join(' ')}`);
  const applied = await runTool(process.execPath, [cli, 'apply', auditTree, ...hooks, '--json']);
  if (applied.code !== 0) throw new Error(`apply exited with ${applied.code}: ${applied.stderr}`);
  const report = JSON.parse(applied.stdout) as ApplyReport;
  const patched = report.files
    .filter((entry) => entry.status === 'patched' && (only === undefined || relative(auditTree, entry.path).startsWith(`${only}/`)))
    .map((entry) => ({ path: entry.path, newRunpath: entry.newRunpath ?? '' }));
  if (patched.length === 0) throw new Error(`apply patched no file${only === undefined ? '' : ` under ${only}/`}: nothing to audit`);
  say(`${patched.length} patched files to audit, ${jobs} at a time`);
  const limit = pLimit(jobs);
  let done = 0;
  const audits = await Promise.all(
    patched.map((file) =>
      limit(async () => {
        const audit = await auditFile(join(pristine, relative(auditTree, file.path)), file, pristine, auditTree);
        if (++done % 250 === 0) say(`${done} of ${patched.length}`);
        return audit;
      }),
    ),
  );
  const findings = audits.flatMap((audit) => audit.findings);
  const fullyResolved = audits.filter((audit) => audit.everyLibraryFound).length;
  const check = await runTool(process.execPath, [cli, 'check', auditTree, ...hooks]);
  const byCheck = (name: Finding['check']): number =>
    new Set(findings.filter((finding) => finding.check === name).map((finding) => finding.file)).size;
  const onMachine = (machine: number): number => audits.filter((audit) => audit.machine === machine).length;
  const loader = (fared: FileAudit['loader']): number => audits.filter((audit) => audit.loader === fared).length;
  const loaderRan = loader('listed') + loader('not listed');
  const rows = [
    ['every tool ran to an exit of its own (no time-out, no signal)', patched.length, byCheck('tool')],
    [
      `the loader's list of what the file loads, the same (x86_64 natively: ${onMachine(EM_X86_64)} files; aarch64 under qemu-aarch64: ${onMachine(EM_AARCH64)})`,
      loaderRan,
      byCheck('loader'),
    ],
    ['`eu-elflint --gnu-ld`, no new complaint', patched.length, byCheck('eu-elflint')],
    ['`readelf -dW`, no new warning', patched.length, byCheck('readelf')],
    ['`readelf -dW` shows the runpath `apply` reported', patched.length, byCheck('runpath')],
  ].map((row) => row.map(String));
  const markdown = [
    `# ${treeArgument === undefined ? 'Closure audit' : `Audit of ${treeName}`}: every patched file, original against patched, through ld.so, eu-elflint and readelf`,
    '',
    `Machine: ${availableParallelism()} CPUs, Node ${process.version}. Tree: ${treeArgument === undefined ? "the closure benchmark's" : `a copy of \`${pristine}\``}${only === undefined ? '' : ` (only ${only}/)`}.`,
    `\`apply ${hooks.join(' ')}\`: ${Object.entries(report.summary.patched)
      .map(([tier, count]) => `${count} ${tier}`)
      .join(', ')}; ${report.summary.failed} failed.`,
    `\`cuda-patchelf check\` on the patched copy afterwards: exit ${check.code}.`,
    `The loader listed ${loader('listed')} of the ${loaderRan} files it ran on, before and after (exit 0), and could not list ${loader('not listed')};`,
    `${loader('no loader')} are for machines it has no loader for here. It found every library of ${fullyResolved} of them; the others need`,
    'one this machine does not have, which the loader lists as `not found` and goes on.',
    '',
    table(['check', 'files audited', 'files with a finding'], rows),
    '',
    ...findings.flatMap((finding) => [`## ${finding.check}: ${finding.file}`, '', '```', finding.detail, '```', '']),
  ].join('\n');
  const out = await writeResults(
    `${hostname().replace(/[^A-Za-z0-9.-]/g, '_')}-${treeName}-audit${nixpkgsCompat ? '-nixpkgs-compat' : ''}`,
    markdown,
  );
  say(`${findings.length} finding(s); check exit ${check.code}; wrote ${out}`);
  process.exitCode = findings.length === 0 && check.code === 0 ? 0 : 1;
}

await main();
