// Our side: `cuda-patchelf apply --auto-patchelf` with a case's inputs, as the specification's command
// line has it (--interpreter and --libc-dir from the same stand-in bintools the anchor reads), and
// what its JSON report says per file.

import { relative } from 'node:path';
import { type AutoPatchelfCase, bintoolsFacts, CUDA_COMPAT, inCopy } from './cases.js';

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
 * The per-file lists the JSON report carries (report version 4): each missing dependency as its list of
 * alternatives (one name for a DT_NEEDED entry, several for a `.note.dlopen` entry).
 */
interface OursReport {
  readonly files: readonly {
    readonly path: string;
    readonly missing?: readonly (readonly string[])[];
    readonly ignoredMissing?: readonly (readonly string[])[];
  }[];
}

/** A dependency's name as auto-patchelf.py prints it: the name, or `any(a, b)` for alternatives. */
const dependencyName = (alternatives: readonly string[]): string =>
  alternatives.length === 1 ? (alternatives[0] as string) : `any(${alternatives.join(', ')})`;

/** Relative path in the copy -> the libraries apply reported missing, and missing but ignored. */
export function oursMissing(stdout: string, copy: string): Map<string, { missing: readonly string[]; ignoredMissing: readonly string[] }> {
  const report = JSON.parse(stdout) as OursReport;
  return new Map(
    report.files.map((file) => [
      relative(copy, file.path),
      { missing: (file.missing ?? []).map(dependencyName), ignoredMissing: (file.ignoredMissing ?? []).map(dependencyName) },
    ]),
  );
}
