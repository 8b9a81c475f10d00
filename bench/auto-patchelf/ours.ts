// Our side: `cuda-patchelf apply --auto-patchelf` with a case's inputs, as the specification's command
// line has it (--interpreter and --libc-dir from the same stand-in bintools the anchor reads), and
// what its JSON report says per file.

import { relative } from 'node:path';
import { type AutoPatchelfCase, bintoolsFacts, CUDA_COMPAT, inCopy } from './cases.js';
import { realDirectory } from './read-back.js';

export interface OursOptions {
  /** The build to run: DIST/cli/main.js. */
  readonly dist: string;
  /** The driver hook (on by default in apply, as in a CUDA package). */
  readonly driver: boolean;
  /** apply, or plan (the same work, nothing written). */
  readonly command: 'apply' | 'plan';
  /** The resolver on (--auto-patchelf and its flags); off: the other hooks alone, to time the index's share. */
  readonly resolver?: boolean;
}

export async function oursArgv(c: AutoPatchelfCase, copy: string, options: OursOptions): Promise<string[]> {
  const { interpreter, libcDir } = await bintoolsFacts(c.bintools);
  const each = (flag: string, values: readonly string[], inTree: boolean): string[] =>
    values.flatMap((value) => [flag, inTree ? inCopy(copy, value) : value]);
  const resolver = [
    '--auto-patchelf',
    '--interpreter',
    interpreter,
    '--libc-dir',
    libcDir,
    ...each('--libs', c.libs, true),
    ...each('--runtime-dependencies', c.runtimeDependencies, true),
    ...each('--append-rpaths', c.appendRpaths, true),
    ...each('--ignore-missing', c.ignoreMissing, false),
  ];
  return [
    process.execPath,
    `${options.dist}/cli/main.js`,
    options.command,
    '--json',
    ...(options.resolver === false ? [] : resolver),
    ...(options.driver ? [] : ['--no-driver']),
    ...(c.cudaFixup ? ['--cuda-compat', CUDA_COMPAT, '--remove-stubs'] : []),
    ...c.paths.map((path) => inCopy(copy, path)),
  ];
}

/**
 * What the JSON report (version 4) says of each file: each missing dependency as its list of
 * alternatives (one name for a DT_NEEDED entry, several for a `.note.dlopen` entry), each directory the
 * resolver added with the names it resolves there, and the error of a file it did not write.
 */
interface OursReport {
  readonly summary: { readonly autoPatchelf?: { readonly libc: { readonly directory: string; readonly glibcOnly: boolean } | null } };
  readonly files: readonly {
    readonly path: string;
    readonly status: string;
    readonly error?: { readonly message: string };
    readonly resolved?: readonly { readonly dir: string; readonly names: readonly string[] }[];
    readonly missing?: readonly (readonly string[])[];
    readonly ignoredMissing?: readonly (readonly string[])[];
  }[];
}

/** A dependency's name as auto-patchelf.py prints it: the name, or `any(a, b)` for alternatives. */
const dependencyName = (alternatives: readonly string[]): string =>
  alternatives.length === 1 ? (alternatives[0] as string) : `any(${alternatives.join(', ')})`;

/** What our run reported of one file (relative to the copy). */
export interface OursFileReport {
  readonly missing: readonly string[];
  readonly ignoredMissing: readonly string[];
  /** Each dependency resolved through the index, and the directory chosen for it. */
  readonly found: readonly { readonly name: string; readonly dir: string }[];
  /** The error of a file the run did not write (a runpath it could not order or prove), or null. */
  readonly failed: string | null;
  /** R, the resolver's directories in order (null: the resolver left the file to the other hooks). */
  readonly listR: readonly string[] | null;
}

export interface OursReports {
  readonly files: ReadonlyMap<string, OursFileReport>;
  /** Whether only glibc's own libraries counted as libc's (a libc directory that holds more: rule 2). */
  readonly glibcOnly: boolean;
}

export function oursReports(stdout: string, copy: string): OursReports {
  const report = JSON.parse(stdout) as OursReport;
  const files = new Map(
    report.files.map((file): [string, OursFileReport] => [
      relative(copy, file.path),
      {
        missing: (file.missing ?? []).map(dependencyName),
        ignoredMissing: (file.ignoredMissing ?? []).map(dependencyName),
        found: (file.resolved ?? []).flatMap(({ dir, names }) => names.map((name) => ({ name, dir: realDirectory(copy, dir) }))),
        failed: file.status === 'failed' ? (file.error?.message ?? 'failed') : null,
        listR: file.resolved === undefined ? null : file.resolved.map(({ dir }) => realDirectory(copy, dir)),
      },
    ]),
  );
  return { files, glibcOnly: report.summary.autoPatchelf?.libc?.glibcOnly ?? false };
}
