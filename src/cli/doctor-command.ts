// `cuda-patchelf doctor PATH...`: which libcuda.so.1 each program really loads, and whether CUDA will
// start — the glibc loader emulated file by file, from a tree or single files (docs/doctor.md).

import { isAbsolute, relative } from 'node:path';
import { statSync } from 'node:fs';
import { byteStringToText } from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { isDriverVersion, readKernelDriverVersion, type DriverVersion } from '../doctor/driver-version.js';
import { driverVersionInCache, LOADER_CACHE } from '../driver-link/driver-release.js';
import { defaultLoaders, hostAbi } from '../loader/machine-abi.js';
import { fileText, namedText, problemsText } from '../doctor/report-text.js';
import { driverVersionOfLibrary, emulationRoot, runDoctor, type TreeResult } from '../doctor/run-doctor.js';
import type { CliIo } from './cli-io.js';
import { EXIT } from './exit-codes.js';
import { counted, errorJson, errorLine, existingTrees, rejectEmptyPaths, rejectEmptyTrees } from './report.js';

/** doctor's exit codes (docs/doctor.md): problems found is its own answer, as `check` finding work is. */
const DOCTOR_EXIT = { ok: EXIT.ok, problems: 1, usage: EXIT.usage, unreadable: EXIT.someFilesFailed } as const;

export interface DoctorOptions {
  root?: string;
  ldLibraryPath?: string;
  json?: boolean;
  problems?: boolean;
  driverLib?: string;
  driverVersion?: string;
}

/** Every check that needs no file of the trees: a usage error here means nothing was diagnosed. */
function checkArguments(paths: readonly string[], options: DoctorOptions, cwd: string): void {
  rejectEmptyPaths(paths, 'files or trees to diagnose');
  // A path that is not there, or is neither a directory nor a file, is a usage error, as for apply.
  existingTrees(paths);
  if (options.driverLib !== undefined && options.driverVersion !== undefined)
    throw new CudaPatchelfError('usage', '--driver-lib and --driver-version both name the driver: give one');
  if (options.driverVersion !== undefined && !isDriverVersion(options.driverVersion))
    throw new CudaPatchelfError('usage', `--driver-version takes a version such as 580.95.05, not "${options.driverVersion}"`);
  if (options.root === undefined) return;
  let isDirectory = false;
  try {
    isDirectory = statSync(options.root).isDirectory();
  } catch {
    // reported below
  }
  if (!isDirectory) throw new CudaPatchelfError('usage', `--root ${options.root} is not a directory`);
  const root = emulationRoot({ root: options.root, cwd });
  if (!defaultLoaders().some((loader) => root.lookUp(loader).ok)) {
    throw new CudaPatchelfError(
      'usage',
      `--root ${options.root} has no dynamic loader (${defaultLoaders().map(byteStringToText).join(', ')}): not a system root`,
    );
  }
  const outside = paths.find((path) => root.pathOf(path) === null);
  if (outside !== undefined)
    throw new CudaPatchelfError('usage', `${outside} is outside --root ${options.root}: the loader of that system cannot see it`);
}

/** The checks of the command line, then of the trees: a directory with no file in it is no tree to diagnose. */
function checkPaths(paths: readonly string[], options: DoctorOptions, cwd: string): void {
  checkArguments(paths, options, cwd);
  rejectEmptyTrees(paths, 'doctor');
}

async function driverOf(options: DoctorOptions, host: { readonly cwd: string; readonly arch: string }): Promise<DriverVersion | null> {
  const { cwd } = host;
  if (options.driverVersion !== undefined) return { version: options.driverVersion, source: '--driver-version' };
  if (options.driverLib !== undefined) {
    let found: DriverVersion | null;
    try {
      found = await driverVersionOfLibrary(options.driverLib, cwd);
    } catch (error) {
      throw new CudaPatchelfError('usage', `--driver-lib: cannot read it (${error instanceof Error ? error.message : String(error)})`, {
        file: options.driverLib,
      });
    }
    if (found === null)
      throw new CudaPatchelfError(
        'usage',
        '--driver-lib: no driver version in its name, its link target or its contents; give --driver-version',
        { file: options.driverLib },
      );
    return found;
  }
  // Another system's driver is not this machine's.
  if (options.root !== undefined) return null;
  // No NVIDIA module loaded (yet): the release of the driver's libcuda the loader's cache lists.
  const abi = hostAbi(host.arch);
  return readKernelDriverVersion() ?? (abi === null ? null : await driverVersionInCache(LOADER_CACHE, abi));
}

function settingsLine(options: DoctorOptions, driver: DriverVersion | null): string {
  const system = options.root === undefined ? 'this machine' : `the system under ${options.root}`;
  const llp =
    options.ldLibraryPath === undefined
      ? 'LD_LIBRARY_PATH not set (--ld-library-path emulates one)'
      : `LD_LIBRARY_PATH=${options.ldLibraryPath}`;
  const kernel =
    driver === null ? 'kernel driver unknown (--driver-version tells it)' : `kernel driver ${driver.version} (${driver.source})`;
  return `doctor: the loader of ${system}; ${llp}; ${kernel}`;
}

/** The findings of a tree's files, and of the file the path names when it is not a dynamic ELF file. */
function counts(tree: TreeResult): { errors: number; warnings: number; problems: number } {
  const reports = [...tree.files, ...(tree.named === null ? [] : [tree.named])];
  const findings = reports.flatMap((report) => report.findings);
  return {
    errors: findings.filter((f) => f.severity === 'error').length,
    warnings: findings.filter((f) => f.severity === 'warning').length,
    problems: reports.filter((report) => report.findings.some((f) => f.severity === 'error')).length,
  };
}

function summaryLine(tree: TreeResult): string {
  const { errors, warnings, problems } = counts(tree);
  const parts = [counted(tree.files.length, 'dynamic ELF file')];
  if (tree.files.length > 0 || problems > 0)
    parts.push(
      errors === 0
        ? warnings === 0
          ? 'all well'
          : `no errors, ${counted(warnings, 'warning')}`
        : `${problems} with problems (${counted(errors, 'error')}, ${counted(warnings, 'warning')})`,
    );
  const tail = [
    `${counted(tree.skipped, 'other file')} skipped`,
    ...(tree.failures.length === 0 ? [] : [`${tree.failures.length} could not be read`]),
  ];
  return `${tree.path}: ${parts.join(', ')}; ${tail.join('; ')}`;
}

/** A file as the report names it: relative to the working directory when its tree was named so, else absolute. */
function shown(file: string, tree: string, cwd: string): string {
  if (isAbsolute(tree)) return file;
  const inside = relative(cwd, file);
  return inside === '' || inside.startsWith('..') ? file : inside;
}

/**
 * The file an error is about when it is not the file that failed: the loader's cache, or a missing
 * loader, which fail every file that needs them (the text says them once, the JSON for each file).
 */
function aboutOf(error: unknown, file: string): { about?: string } {
  return error instanceof CudaPatchelfError && error.file !== undefined && error.file !== file ? { about: error.file } : {};
}

/** The doctor command: diagnose the paths, print the report, set the exit code. */
export async function doctor(paths: readonly string[], options: DoctorOptions, io: CliIo): Promise<void> {
  if (io.host === undefined) throw new Error('doctor diagnoses files for the machine it runs on, and was not told which (CliIo.host)');
  const { cwd, arch } = io.host;
  checkPaths(paths, options, cwd);
  const driver = await driverOf(options, io.host);
  const trees: TreeResult[] = [];
  if (options.json !== true) io.out(settingsLine(options, driver));
  const printed = new Set<string>();
  for await (const tree of runDoctor({
    paths,
    root: options.root ?? null,
    ldLibraryPath: options.ldLibraryPath ?? null,
    cwd,
    arch,
    driver,
  })) {
    trees.push(tree);
    for (const failure of tree.failures) {
      // One broken cache or loader fails every file that needs it: say so once.
      const line = errorLine(failure.error, failure.file);
      if (!printed.has(line)) io.err(line);
      printed.add(line);
    }
    if (options.json !== true) {
      const named = tree.named === null ? null : namedText(tree.named, shown(tree.named.file, tree.path, cwd), options.problems === true);
      if (named !== null) io.out(`\n${named}`);
      for (const file of tree.files) {
        const text =
          options.problems === true
            ? problemsText(file, shown(file.file, tree.path, cwd))
            : fileText(file, shown(file.file, tree.path, cwd));
        if (text !== null) io.out(`\n${text}`);
      }
      io.out(`\n${summaryLine(tree)}`);
    }
  }
  if (options.json === true) {
    io.out(
      JSON.stringify(
        {
          version: 1,
          settings: { root: options.root ?? null, ldLibraryPath: options.ldLibraryPath ?? null, driver },
          files: trees.flatMap((tree) => (options.problems === true ? tree.files.filter((file) => file.findings.length > 0) : tree.files)),
          notDynamic: trees.flatMap((tree) =>
            tree.named === null || (options.problems === true && tree.named.findings.length === 0) ? [] : [tree.named],
          ),
          errors: trees.flatMap((tree) =>
            tree.failures.map((failure) => ({
              file: failure.file,
              error: { ...errorJson(failure.error), ...aboutOf(failure.error, failure.file) },
            })),
          ),
          summary: trees.map((tree) => ({
            path: tree.path,
            files: tree.files.length,
            skipped: tree.skipped,
            unreadable: tree.failures.length,
            ...counts(tree),
          })),
        },
        null,
        2,
      ),
    );
  }
  const unreadable = trees.some((tree) => tree.failures.length > 0);
  const problems = trees.some((tree) => counts(tree).errors > 0);
  io.setExitCode(unreadable ? DOCTOR_EXIT.unreadable : problems ? DOCTOR_EXIT.problems : DOCTOR_EXIT.ok);
}
