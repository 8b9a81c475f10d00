// Shared libraries and programs compiled from C here, with gcc or the cross gcc of the architecture, for
// the tests that patch what they built and then load it. What a file is linked with is said one way: the
// libraries it needs (paths; their sonames become its DT_NEEDED, in that order, kept by --no-as-needed),
// its DT_RUNPATH or DT_RPATH, and for a library its DT_SONAME (by default its file name).

import { mkdir, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { BuildArch } from './arch.js';
import { mustExec } from './exec.js';
import { compilerFor } from './fixtures.js';

export interface LinkOptions {
  /** x86_64 unless given. */
  readonly arch?: BuildArch;
  /** Libraries to link, as paths: their sonames become DT_NEEDED, in this order. */
  readonly needs?: readonly string[];
  readonly runpath?: string;
  readonly rpath?: string;
  /** More compiler or linker arguments, after the others (-D…, -ldl, -Wl,-rpath-link,…, another source). */
  readonly extra?: readonly string[];
}

function linkArguments(options: LinkOptions): string[] {
  const args = ['-Wl,--no-as-needed', ...(options.needs ?? [])];
  if (options.runpath !== undefined) args.push(`-Wl,--enable-new-dtags,-rpath,${options.runpath}`);
  if (options.rpath !== undefined) args.push(`-Wl,--disable-new-dtags,-rpath,${options.rpath}`);
  return [...args, ...(options.extra ?? [])];
}

/** A shared library at `path`, compiled from the C file `source`, with DT_SONAME `soname` (null: none). */
export async function compileLibrary(
  path: string,
  source: string,
  options: LinkOptions & { readonly soname?: string | null } = {},
): Promise<string> {
  const soname = options.soname === undefined ? basename(path) : options.soname;
  await mkdir(dirname(path), { recursive: true });
  const name = soname === null ? [] : [`-Wl,-soname,${soname}`];
  const args = ['-shared', '-fPIC', '-O1', '-o', path, source, ...name, ...linkArguments(options)];
  await mustExec(compilerFor(options.arch ?? 'x86_64'), args);
  return path;
}

/** A program at `path`, compiled from the C file `source`. */
export async function compileProgram(path: string, source: string, options: LinkOptions = {}): Promise<string> {
  await mkdir(dirname(path), { recursive: true });
  await mustExec(compilerFor(options.arch ?? 'x86_64'), ['-O1', '-o', path, source, ...linkArguments(options)]);
  return path;
}

/** Writes each source (file name -> text) into `dir`; returns the path of a source by its name. */
export async function writeSources(dir: string, sources: Readonly<Record<string, string>>): Promise<(name: string) => string> {
  await mkdir(dir, { recursive: true });
  for (const [name, text] of Object.entries(sources)) await writeFile(join(dir, name), text);
  return (name) => {
    if (!(name in sources)) throw new Error(`no source ${name} in ${dir}`);
    return join(dir, name);
  };
}
