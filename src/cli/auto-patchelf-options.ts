// --auto-patchelf and its flags for apply, check and plan: the options, their usage errors (before any
// file of the trees is read), and the lines and JSON fields of what the resolver found.

import { realpathSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Command } from 'commander';
import type { ResolverReport, AutoPatchelfOptions, TreeResolution } from '../batch/resolve-trees.js';
import { byteStringToText, textToByteString } from '../elf/byte-string.js';
import { ElfFile } from '../elf/elf-file.js';
import { CudaPatchelfError, oneLine } from '../errors/cuda-patchelf-error.js';
import { ignoreMissingMatcher } from '../resolve/ignore-missing.js';
import type { CliIo } from './cli-io.js';
import { docPath } from './package-files.js';

export interface AutoPatchelfFlags {
  autoPatchelf?: boolean;
  libs?: string[];
  runtimeDependencies?: string[];
  appendRpaths?: string[];
  ignoreMissing?: string[];
  interpreter?: string;
  libcDir?: string;
  keepLibc?: boolean;
  relativeToTree?: boolean;
}

const collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

export function withAutoPatchelfOptions(command: Command): Command {
  return command
    .option(
      '--auto-patchelf',
      "find each file's libraries and put their directories in its runpath, as Nixpkgs' autoPatchelfHook; " +
        `first, the other hooks composed after it (see ${docPath('auto-patchelf.md')})`,
    )
    .option('--libs <dir>', 'auto-patchelf: a library directory (or file) to search, not recursively; repeatable, in order', collect)
    .option('--runtime-dependencies <dir>', 'auto-patchelf: put first in the runpath of files with an interpreter; repeatable', collect)
    .option('--append-rpaths <dir>', "auto-patchelf: put last in every file's resolved directories; repeatable", collect)
    .option(
      '--ignore-missing <glob>',
      'auto-patchelf: a library whose name matches (fnmatch) may be missing: a warning, not an error; repeatable',
      collect,
    )
    .option('--interpreter <file>', 'auto-patchelf: the interpreter of every program; files of another machine or OS ABI are left out')
    .option('--libc-dir <dir>', "auto-patchelf: libc's directory, whose libraries need no runpath entry (default: the interpreter's)")
    .option('--keep-libc', "auto-patchelf: put libc's directory in the runpath too when a library found there is in the index")
    .option('--relative-to-tree', 'auto-patchelf: write a directory inside the trees as $ORIGIN/<relative path>');
}

const RESOLVER_FLAGS: readonly (readonly [keyof AutoPatchelfFlags, string])[] = [
  ['libs', '--libs'],
  ['runtimeDependencies', '--runtime-dependencies'],
  ['appendRpaths', '--append-rpaths'],
  ['ignoreMissing', '--ignore-missing'],
  ['interpreter', '--interpreter'],
  ['libcDir', '--libc-dir'],
  ['keepLibc', '--keep-libc'],
  ['relativeToTree', '--relative-to-tree'],
];

const usage = (message: string, file?: string): CudaPatchelfError =>
  new CudaPatchelfError('usage', message, file === undefined ? {} : { file });

/** The interpreter's machine and OS ABI, read from its header: a usage error when it is missing or not ELF. */
async function interpreterOf(path: string): Promise<NonNullable<AutoPatchelfOptions['interpreter']>> {
  const opened = await ElfFile.open(path);
  if (opened.kind !== 'elf') throw usage(`--interpreter: ${opened.error.message}`, path);
  const { header } = opened.file;
  opened.file.close();
  return { path: textToByteString(path), machine: header.e_machine, osAbi: header.osabi };
}

/**
 * The resolver's options, or null without --auto-patchelf; usage errors for a flag given without it, an
 * --interpreter that is not an ELF file, a --libc-dir that is not a directory, a bad pattern. A --libs
 * directory that does not exist is no error: Nix passes every dependency's lib/.
 */
export async function autoPatchelfOptionsOf(flags: AutoPatchelfFlags, host: CliIo['host']): Promise<AutoPatchelfOptions | null> {
  if (!flags.autoPatchelf) {
    const given = RESOLVER_FLAGS.find(([key]) => flags[key] !== undefined);
    if (given !== undefined) throw usage(`${given[1]} needs --auto-patchelf`);
    return null;
  }
  const ignoreMissing = flags.ignoreMissing ?? [];
  ignoreMissingMatcher(ignoreMissing);
  const interpreter = flags.interpreter === undefined ? null : await interpreterOf(flags.interpreter);
  if (flags.libcDir !== undefined && !isDirectory(flags.libcDir)) throw usage('--libc-dir: not a directory', flags.libcDir);
  return {
    libs: flags.libs ?? [],
    runtimeDependencies: (flags.runtimeDependencies ?? []).map(textToByteString),
    appendRpaths: (flags.appendRpaths ?? []).map(textToByteString),
    ignoreMissing,
    interpreter,
    // On Nix the interpreter is glibc's lib/ld-linux…, on Debian /usr/lib/<triplet>/ld-linux…: libc is beside it.
    libcDir: flags.libcDir ?? (flags.interpreter === undefined ? null : dirname(realpathSync(flags.interpreter))),
    keepLibc: flags.keepLibc === true,
    relativeToTree: flags.relativeToTree === true,
    host: hostOf(host),
  };
}

/** The machine the resolver's proof emulates the loader of (its CPU, its working directory). */
function hostOf(host: CliIo['host']): AutoPatchelfOptions['host'] {
  if (host === undefined)
    throw new Error('--auto-patchelf proves runpaths for the machine it runs on, and was not told which (CliIo.host)');
  return host;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

type Findings = NonNullable<Omit<TreeResolution, 'items'>>;

/** A dependency by its alternatives, for people: `libbpf.so.1 (or libbpf.so.0)`. */
function dependencyText(alternatives: readonly string[]): string {
  const [first, ...others] = alternatives.map((name) => oneLine(byteStringToText(name)));
  return others.length === 0 ? (first ?? '') : `${first} (or ${others.join(', or ')})`;
}

/** Dependencies nothing resolved, over the run. */
export function missingCount(findings: Findings | null): number {
  let count = 0;
  for (const report of findings?.reports.values() ?? []) count += report.missing.length;
  return count;
}

/** The files the resolver left to the other hooks, by reason (`2734 other-machine`), or null for none. */
function skippedNote(findings: Findings): string | null {
  const reasons = Object.entries(findings.skipped).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const total = reasons.reduce((sum, [, count]) => sum + (count ?? 0), 0);
  if (total === 0) return null;
  const counts = reasons.map(([reason, count]) => `${count ?? 0} ${reason}`).join(', ');
  return `cuda-patchelf: note: --auto-patchelf left ${total} file(s) of another target to the other hooks (${counts})`;
}

/**
 * The resolver's lines for stderr, in path order: an error per file and library missing, and unless
 * `quiet` a warning per one --ignore-missing matched, the run's warnings (a name in two directories,
 * a malformed note), and a note counting the files of another target it left to the other hooks.
 */
export function resolverLines(findings: Findings, quiet: boolean): string[] {
  const note = quiet ? null : skippedNote(findings);
  const lines: string[] = [
    ...(quiet ? [] : findings.warnings.map((warning) => `cuda-patchelf: warning: ${oneLine(warning)}`)),
    ...(note === null ? [] : [note]),
  ];
  const paths = [...findings.reports.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  for (const path of paths) {
    const report = findings.reports.get(path);
    if (report === undefined) continue;
    for (const missing of report.missing) lines.push(`cuda-patchelf: ${oneLine(path)}: library ${dependencyText(missing)} not found`);
    if (quiet) continue;
    for (const ignored of report.ignoredMissing) {
      lines.push(`cuda-patchelf: warning: ${oneLine(path)}: library ${dependencyText(ignored)} not found (--ignore-missing)`);
    }
  }
  return lines;
}

/** The names an entry of the runpath resolves, when the resolver put it there: `libz.so.1, libm.so.6`. */
export function namesResolvedBy(report: ResolverReport | undefined, entry: string): string | null {
  const names = report?.resolved.find((directory) => directory.entry === entry)?.names ?? [];
  return names.length === 0 ? null : names.map((name) => byteStringToText(name)).join(', ');
}

const texts = (names: readonly string[]): string[] => names.map(byteStringToText);

/** The resolver's fields of one file in the JSON report. */
export function resolverJson(report: ResolverReport): object {
  return {
    ...(report.interpreter === null
      ? {}
      : { interpreter: { old: byteStringToText(report.interpreter.old), new: byteStringToText(report.interpreter.new) } }),
    resolved: report.resolved.map((directory) => ({
      dir: byteStringToText(directory.directory),
      entry: byteStringToText(directory.entry),
      names: texts(directory.names),
    })),
    missing: report.missing.map(texts),
    ignoredMissing: report.ignoredMissing.map(texts),
  };
}
