// How the CLI turns errors and byte strings into lines for people and JSON for machines.

import { realpathSync, statSync, type Stats } from 'node:fs';
import { CudaPatchelfError, oneLine } from '../errors/cuda-patchelf-error.js';
import { describeFileType, ioError } from '../errors/io-error.js';
import { walkTrees } from '../walk/walk-trees.js';
import type { CliIo } from './cli-io.js';
import { EXIT } from './exit-codes.js';

/** A count and its noun, in the singular for one: `1 file`, `3 files`, `2 libraries`. */
export function counted(n: number, singular: string, plural = `${singular}s`): string {
  return `${n} ${n === 1 ? singular : plural}`;
}

/** One line for stderr: the file, what is wrong and where. Unexpected errors say so. */
export function errorLine(error: unknown, file?: string): string {
  if (error instanceof CudaPatchelfError) return `cuda-patchelf: ${(file === undefined ? error : error.withFile(file)).describe()}`;
  const message = error instanceof Error ? error.message : String(error);
  return `cuda-patchelf: ${file === undefined ? '' : `${oneLine(file)}: `}internal error: ${oneLine(message)}`;
}

/** The JSON form of an error, with stable field names. */
export function errorJson(error: unknown): { kind: string; message: string; offset: number | null } {
  if (error instanceof CudaPatchelfError) return { kind: error.kind, message: error.message, offset: error.offset ?? null };
  return { kind: 'internal', message: error instanceof Error ? error.message : String(error), offset: null };
}

/**
 * An empty path is almost always an unset variable (`cuda-patchelf apply "$out"`): taken as the working
 * directory it would patch whatever is there, so it is a usage error before anything is read.
 */
export function rejectEmptyPaths(paths: readonly string[], what: string): void {
  if (paths.some((path) => path === ''))
    throw new CudaPatchelfError('usage', `an empty path was given (an unset variable?); name the ${what}`);
}

/**
 * The real path of every tree named, or a usage error naming the first that is missing, cannot be
 * reached, or is neither a directory nor a regular file (a FIFO, a device): a mistyped tree beside
 * good ones must stop the run before anything is read, not leave the others patched and exit 3.
 * A symbolic link is followed, as the walk follows a tree named through one (Nix's ./result).
 */
export function existingTrees(paths: readonly string[]): { dir: string; real: string }[] {
  return paths.map((dir) => {
    let stats: Stats;
    let real: string;
    try {
      stats = statSync(dir);
      real = realpathSync(dir);
    } catch (error) {
      throw new CudaPatchelfError('usage', ioError(dir, 'walk', error).message, { file: dir });
    }
    if (!stats.isDirectory() && !stats.isFile())
      throw new CudaPatchelfError('usage', `cannot walk ${describeFileType(stats)}: name a directory or a file`, { file: dir });
    return { dir, real };
  });
}

/**
 * A usage error for a directory that holds no file at all: a gate (`check`, `doctor`) that found
 * nothing to look at has checked nothing, which a mistyped path in a CI script must not pass for.
 */
export function rejectEmptyTrees(paths: readonly string[], command: string): void {
  for (const path of paths) {
    if (!statSync(path).isDirectory()) continue;
    const first = walkTrees([path]).next();
    if (first.done === true)
      throw new CudaPatchelfError('usage', `holds no file: ${command} has nothing to check there (a mistyped path?)`, { file: path });
  }
}

/** What one file contributes to a multi-file command's output. */
export interface FileOutput {
  readonly json: object;
  /** Text for stdout; null prints nothing. */
  readonly text: string | null;
}

/**
 * Runs `work` on each file in turn: a failure is one stderr line (and a JSON error object) and the
 * others go on; the exit code says whether any failed. With `json`, one array goes to stdout at the end.
 */
export async function forEachFile(
  io: CliIo,
  files: readonly string[],
  json: boolean,
  work: (file: string) => Promise<FileOutput>,
): Promise<void> {
  let failed = false;
  const records: object[] = [];
  for (const file of files) {
    try {
      const report = await work(file);
      if (json) records.push(report.json);
      else if (report.text !== null) io.out(report.text);
    } catch (error) {
      failed = true;
      io.err(errorLine(error, file));
      if (json) records.push({ file, error: errorJson(error) });
    }
  }
  if (json) io.out(JSON.stringify(records, null, 2));
  io.setExitCode(failed ? EXIT.someFilesFailed : EXIT.ok);
}
