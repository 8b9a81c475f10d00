// Small programs and libraries built with gcc for the loader-order tests: each library defines one
// function, links the libraries it is told to (their sonames become its DT_NEEDED) and carries the
// DT_RUNPATH or DT_RPATH it is given.

import { mkdir, writeFile } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { compileLibrary, compileProgram, type LinkOptions } from './compile.js';

async function source(path: string, text: string): Promise<string> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, text);
  return path;
}

/** A shared library at `path` with DT_SONAME `soname` (default: its file name). */
export async function buildLibrary(path: string, soname: string | null = basename(path), options: LinkOptions = {}): Promise<string> {
  const symbol = basename(path).replace(/\W/g, '_');
  return compileLibrary(path, await source(`${path}.c`, `int ${symbol}(void) { return 0; }\n`), { ...options, soname });
}

/** A program at `path` that prints "ok" (and, linked with --no-as-needed, needs every library given). */
export async function buildProgram(path: string, options: LinkOptions = {}): Promise<string> {
  return compileProgram(path, await source(`${path}.c`, '#include <stdio.h>\nint main(void) { puts("ok"); return 0; }\n'), options);
}
