// --auto-patchelf and its flags for apply, check and plan: the options, their usage errors (before any
// file of the trees is read), and the lines and JSON fields of what the resolver found.

import { existsSync, realpathSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import type { ResolverReport, AutoPatchelfOptions, TreeResolution } from '../batch/resolve-trees.js';
import { asciiByteString, type ByteString, byteStringToText, ElfFile, textToByteString } from '../elf/elf.js';
import { CudaPatchelfError, oneLine } from '../errors/cuda-patchelf-error.js';
import { SystemRoot } from '../loader/system-root.js';
import { isGlibcLibrary } from '../loader/glibc-libraries.js';
import { ignoreMissingMatcher } from '../resolve/ignore-missing.js';
import type { CliIo } from './cli-io.js';
import { docPath } from './package-files.js';
import { counted } from './report.js';

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
  root?: string;
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
    .option('--relative-to-tree', 'auto-patchelf: write a directory inside the trees as $ORIGIN/<relative path>')
    .option(
      '--root <dir>',
      'auto-patchelf: patch for the system whose root is DIR (a Jetson image): the trees lie in it, and --interpreter, ' +
        '--libc-dir, --libs, --runtime-dependencies and --append-rpaths are paths as that system names them',
    );
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
  ['root', '--root'],
];

const usage = (message: string, file?: string): CudaPatchelfError =>
  new CudaPatchelfError('usage', message, file === undefined ? {} : { file });

/** Where the paths of the flags are: this machine, or the system under --root (its paths as that system names them). */
class TargetPaths {
  private readonly root: SystemRoot | null;

  constructor(root: string | null) {
    this.root = root === null ? null : new SystemRoot(root, asciiByteString('/'));
  }

  /** This machine's path of a path of the target, its links followed inside the root; null when there is none. */
  host(path: string): string | null {
    if (this.root === null) return existsSync(path) ? path : null;
    const found = this.root.lookUp(textToByteString(path));
    return found.ok ? found.hostPath : null;
  }

  /** This machine's path of a directory of the target as written, whether or not it exists (a runpath entry). */
  spelled(path: string): string {
    return this.root === null ? path : this.root.hostPathOf(textToByteString(path));
  }

  /** The directory of the interpreter's real path, as the target names it. */
  realDirectory(path: string): string {
    if (this.root === null) return dirname(realpathSync(path));
    const real = this.root.realPath(textToByteString(path));
    return typeof real === 'string' ? dirname(byteStringToText(real)) : dirname(path);
  }
}

/** --libs: directories (or files) that exist; one that does not is a mistyped path (the setup hook passes only those that exist). */
function libsOf(libs: readonly string[], paths: TargetPaths): string[] {
  return libs.map((dir) => {
    const found = paths.host(dir);
    if (found === null) throw usage('--libs: no such directory or file', dir);
    return found;
  });
}

/** The interpreter's machine and OS ABI, read from its header: a usage error when it is missing or not ELF. */
async function interpreterOf(
  path: string,
  paths: TargetPaths,
  root: string | null,
): Promise<NonNullable<AutoPatchelfOptions['interpreter']>> {
  const found = paths.host(path);
  if (found === null) {
    const how =
      root === null
        ? 'the interpreter of another system is read inside its root: --root DIR, and --interpreter as that system names it'
        : `not in --root ${root}`;
    throw usage(`--interpreter: no such file (${how})`, path);
  }
  const opened = await ElfFile.open(found);
  if (opened.kind !== 'elf') throw usage(`--interpreter: ${opened.error.message}`, path);
  const { header } = opened.file;
  opened.file.close();
  return { path: textToByteString(path), machine: header.e_machine, osAbi: header.osabi };
}

/** --root: a directory that holds the trees (they are patched as that system will see them). */
function rootOf(flags: AutoPatchelfFlags, trees: readonly string[]): string | null {
  if (flags.root === undefined) return null;
  const root = resolve(flags.root);
  if (!isDirectory(root)) throw usage('--root: not a directory', flags.root);
  if (flags.interpreter !== undefined && !flags.interpreter.startsWith('/'))
    throw usage('--interpreter: an absolute path of the system under --root', flags.interpreter);
  const realRoot = realpathSync(root);
  const outside = trees.find((tree) => !`${realpathSync(tree)}/`.startsWith(`${realRoot}/`));
  if (outside !== undefined)
    throw usage(`outside --root ${flags.root}: with --root the trees are patched as that system sees them`, outside);
  return root;
}

/**
 * The resolver's options, or null without --auto-patchelf; usage errors for a flag given without it, an
 * --interpreter that is not an ELF file, a --libc-dir that is not a directory, a --libs path that does
 * not exist, a tree outside --root, a bad pattern.
 */
export async function autoPatchelfOptionsOf(
  flags: AutoPatchelfFlags,
  host: CliIo['host'],
  trees: readonly string[],
): Promise<AutoPatchelfOptions | null> {
  if (!flags.autoPatchelf) {
    const given = RESOLVER_FLAGS.find(([key]) => flags[key] !== undefined);
    if (given !== undefined) throw usage(`${given[1]} needs --auto-patchelf`);
    return null;
  }
  // Compiled here, once: a bad pattern is a usage error before any file is read.
  const ignoredMissing = ignoreMissingMatcher(flags.ignoreMissing ?? []);
  const root = rootOf(flags, trees);
  const paths = new TargetPaths(root);
  const interpreter = flags.interpreter === undefined ? null : await interpreterOf(flags.interpreter, paths, root);
  const libcDir = flags.libcDir === undefined ? null : paths.host(flags.libcDir);
  if (flags.libcDir !== undefined && (libcDir === null || !isDirectory(libcDir))) throw usage('--libc-dir: not a directory', flags.libcDir);
  // On Nix the interpreter is glibc's lib/ld-linux…, on Debian /usr/lib/<triplet>/ld-linux…: libc is beside it.
  const besideInterpreter = flags.interpreter === undefined ? null : paths.host(paths.realDirectory(flags.interpreter));
  return {
    libs: libsOf(flags.libs ?? [], paths),
    runtimeDependencies: (flags.runtimeDependencies ?? []).map((dir) => textToByteString(paths.spelled(dir))),
    appendRpaths: (flags.appendRpaths ?? []).map((dir) => textToByteString(paths.spelled(dir))),
    ignoredMissing,
    interpreter,
    libcDir: libcDir ?? besideInterpreter,
    keepLibc: flags.keepLibc === true,
    relativeToTree: flags.relativeToTree === true,
    root,
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
function dependencyText(alternatives: readonly ByteString[]): string {
  const [first, ...others] = alternatives.map((name) => oneLine(byteStringToText(name)));
  return others.length === 0 ? (first ?? '') : `${first} (or ${others.join(', or ')})`;
}

/** Dependencies nothing resolved, over the run, and the files that have one. */
export interface MissingCount {
  readonly libraries: number;
  readonly files: number;
}

export function missingCount(findings: Findings | null): MissingCount {
  let libraries = 0;
  let files = 0;
  for (const report of findings?.reports.values() ?? []) {
    libraries += report.missing.length;
    if (report.missing.length > 0) files++;
  }
  return { libraries, files };
}

/** `3 missing libraries in 2 files`, for the summary lines. */
export function missingText(missing: MissingCount): string {
  return `${counted(missing.libraries, 'missing library', 'missing libraries')} in ${counted(missing.files, 'file')}`;
}

/** Which libc directory the run used, for the summary line: its libraries need no runpath entry. */
export function libcText(findings: Findings): string {
  if (findings.libc === null) return 'no libc directory (--interpreter names one)';
  const which = findings.libc.glibcOnly ? "glibc's own libraries in" : 'libc';
  return `${which} ${oneLine(findings.libc.directory)}`;
}

/**
 * Without a libc directory (no --interpreter, no --libc-dir), glibc's own libraries are found nowhere
 * in most trees: one line for all of them, with what to pass, instead of one per file.
 */
function glibcMissingLine(findings: Findings): { line: string | null; glibc: (missing: readonly ByteString[]) => boolean } {
  const glibc = (missing: readonly ByteString[]): boolean => findings.libc === null && missing.every(isGlibcLibrary);
  const names = new Set<string>();
  let files = 0;
  for (const report of findings.reports.values()) {
    const found = report.missing.filter(glibc);
    if (found.length > 0) files++;
    for (const missing of found) for (const name of missing) names.add(oneLine(byteStringToText(name)));
  }
  if (files === 0) return { line: null, glibc };
  const line =
    `cuda-patchelf: ${counted(files, 'file needs', 'files need')} glibc's libraries (${[...names].sort().join(', ')}), which ` +
    "--auto-patchelf finds in libc's directory only: give the target's dynamic loader, --interpreter FILE (libc's directory " +
    'is beside it; in a Nix build, $(cat $NIX_BINTOOLS/nix-support/dynamic-linker)), or --libc-dir DIR';
  return { line, glibc };
}

/** The files the resolver left to the other hooks, by reason (`2734 other-machine`), or null for none. */
function skippedNote(findings: Findings): string | null {
  const reasons = Object.entries(findings.skipped).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const total = reasons.reduce((sum, [, count]) => sum + (count ?? 0), 0);
  if (total === 0) return null;
  const counts = reasons.map(([reason, count]) => `${count ?? 0} ${reason}`).join(', ');
  return `cuda-patchelf: note: --auto-patchelf left ${counted(total, 'file')} of another target to the other hooks (${counts})`;
}

/**
 * The resolver's lines for stderr, in path order: an error per file and library missing (glibc's,
 * without a libc directory, in one line for the run), and unless
 * `quiet` a warning per one --ignore-missing matched, the run's warnings (a name in two directories,
 * a malformed note), and a note counting the files of another target it left to the other hooks.
 */
export function resolverLines(findings: Findings, quiet: boolean): string[] {
  const note = quiet ? null : skippedNote(findings);
  const lines: string[] = [
    ...(quiet ? [] : findings.warnings.map((warning) => `cuda-patchelf: warning: ${oneLine(warning)}`)),
    ...(note === null ? [] : [note]),
  ];
  const glibcMissing = glibcMissingLine(findings);
  if (glibcMissing.line !== null) lines.push(glibcMissing.line);
  const paths = [...findings.reports.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  for (const path of paths) {
    const report = findings.reports.get(path);
    if (report === undefined) continue;
    for (const missing of report.missing.filter((m) => !glibcMissing.glibc(m)))
      lines.push(`cuda-patchelf: ${oneLine(path)}: library ${dependencyText(missing)} not found`);
    if (quiet) continue;
    for (const ignored of report.ignoredMissing) {
      lines.push(`cuda-patchelf: warning: ${oneLine(path)}: library ${dependencyText(ignored)} not found (--ignore-missing)`);
    }
  }
  return lines;
}

/** The names an entry of the runpath resolves, when the resolver put it there: `libz.so.1, libm.so.6`. */
export function namesResolvedBy(report: ResolverReport | undefined, entry: ByteString): string | null {
  const names = report?.resolved.find((directory) => directory.entry === entry)?.names ?? [];
  return names.length === 0 ? null : names.map((name) => byteStringToText(name)).join(', ');
}

const texts = (names: readonly ByteString[]): string[] => names.map(byteStringToText);

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
