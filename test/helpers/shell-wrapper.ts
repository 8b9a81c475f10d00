// Shell wrappers as Nixpkgs' makeShellWrapper (wrapProgram: --inherit-argv0) writes them, with the
// LD_LIBRARY_PATH lines of each of its flags (make-wrapper.sh), for the tests that follow a wrapper.

import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/** What makeShellWrapper writes for one of its flags, on LD_LIBRARY_PATH (make-wrapper.sh, addValue: ${v@Q} quotes a plain value as 'v'). */
export type WrapperFlag =
  | { prefix: string }
  | { suffix: string }
  | { set: string }
  | { setDefault: string }
  | 'unset'
  | { oldPrefix: string }
  | { oldSuffix: string };

function flagLines(flag: WrapperFlag): string[] {
  const v = 'LD_LIBRARY_PATH';
  if (flag === 'unset') return [`unset ${v}`];
  if ('set' in flag) return [`export ${v}='${flag.set}'`];
  if ('setDefault' in flag) return [`export ${v}=\${${v}-'${flag.setDefault}'}`];
  // The forms of makeWrapper before makeShellWrapper deduplicated the entries.
  if ('oldPrefix' in flag) return [`export ${v}='${flag.oldPrefix}'\${${v}:+':'$${v}}`];
  if ('oldSuffix' in flag) return [`export ${v}+=\${${v}:+':'}'${flag.oldSuffix}'`];
  const around = [`${v}=\${${v}:+':'$${v}':'}`];
  const after = [`${v}=\${${v}#':'}`, `${v}=\${${v}%':'}`, `export ${v}`];
  if ('prefix' in flag) return [...around, `${v}=\${${v}/':''${flag.prefix}'':'/':'}`, `${v}='${flag.prefix}'$${v}`, ...after];
  return [...around, `if [[ $${v} != *':''${flag.suffix}'':'* ]]; then`, `    ${v}=$${v}'${flag.suffix}'`, 'fi', ...after];
}

/** A wrapper at `path` that runs `program`, as makeShellWrapper (wrapProgram: --inherit-argv0) writes it. */
export async function makeShellWrapper(
  path: string,
  program: string,
  flags: readonly WrapperFlag[],
  extra: readonly string[] = [],
): Promise<string> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, ['#! /bin/bash -e', ...flags.flatMap(flagLines), ...extra, `exec -a "$0" "${program}"  "$@" `, ''].join('\n'));
  await chmod(path, 0o755);
  return path;
}
