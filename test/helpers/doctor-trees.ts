// Small programs and libraries built with gcc for the loader-order tests: each library defines one
// function, links the libraries it is told to (their sonames become its DT_NEEDED) and carries the
// DT_RUNPATH or DT_RPATH it is given.

import { mkdir, writeFile } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import type { BuildArch } from './arch.js';
import { compilerFor } from './fixtures.js';
import { mustExec } from './exec.js';

export interface BuildOptions {
  readonly arch?: BuildArch;
  /** Libraries to link (paths): their sonames become DT_NEEDED, in this order. */
  readonly needs?: readonly string[];
  readonly runpath?: string;
  readonly rpath?: string;
  /** More linker or compiler arguments (-Wl,-z,nodefaultlib …). */
  readonly extra?: readonly string[];
}

function linkArguments(options: BuildOptions): string[] {
  const args = ['-Wl,--no-as-needed', ...(options.needs ?? [])];
  if (options.runpath !== undefined) args.push(`-Wl,--enable-new-dtags,-rpath,${options.runpath}`);
  if (options.rpath !== undefined) args.push(`-Wl,--disable-new-dtags,-rpath,${options.rpath}`);
  return [...args, ...(options.extra ?? [])];
}

async function source(path: string, text: string): Promise<string> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, text);
  return path;
}

/** A shared library at `path` with DT_SONAME `soname` (default: its file name). */
export async function buildLibrary(path: string, soname: string | null = basename(path), options: BuildOptions = {}): Promise<string> {
  const symbol = basename(path).replace(/\W/g, '_');
  const c = await source(`${path}.c`, `int ${symbol}(void) { return 0; }\n`);
  const name = soname === null ? [] : [`-Wl,-soname,${soname}`];
  await mustExec(compilerFor(options.arch ?? 'x86_64'), ['-shared', '-fPIC', '-O1', '-o', path, c, ...name, ...linkArguments(options)]);
  return path;
}

/** A program at `path` that prints "ok" (and, linked with --no-as-needed, needs every library given). */
export async function buildProgram(path: string, options: BuildOptions = {}): Promise<string> {
  const c = await source(`${path}.c`, '#include <stdio.h>\nint main(void) { puts("ok"); return 0; }\n');
  await mustExec(compilerFor(options.arch ?? 'x86_64'), ['-O1', '-o', path, c, ...linkArguments(options)]);
  return path;
}
