// `doctor` over the paths it was given: each tree walked as apply walks it (links inside are not
// followed: a library is diagnosed once, under its real name), each dynamic ELF file diagnosed, the
// rest counted.

import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { asciiByteString, type ByteString, ElfFile, textToByteString } from '../elf/elf.js';
import { skipReason } from '../edit/skip-reason.js';
import { walkTrees } from '../walk/walk-trees.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { readCpuInfo } from '../loader/cpu-model.js';
import { diagnoseFile, doctorContext, type DoctorContext } from './diagnose.js';
import { fileReport, type FileReport } from './doctor-report.js';
import type { DriverVersion } from './driver-version.js';
import { LoaderRegistry } from '../loader/emulated-loader.js';
import { fileNature, followNamedFile, type NamedFile } from './named-file.js';
import { describeLibcuda } from './libcuda-facts.js';
import { hostAbi } from '../loader/machine-abi.js';
import { AS_THE_LOADER_READS, ObjectFactsCache } from '../loader/object-facts.js';
import { ObjectStrings } from './object-strings.js';
import { SystemRoot } from '../loader/system-root.js';

export interface DoctorRequest {
  readonly paths: readonly string[];
  /** --root: the system root on this machine, or null for this machine's own system. */
  readonly root: string | null;
  /** --ld-library-path, as text; null when not set. */
  readonly ldLibraryPath: string | null;
  /** The working directory of doctor (the emulated process's too, without --root). */
  readonly cwd: string;
  /** Node's process.arch: this machine's CPU is the emulated one for its own architecture. */
  readonly arch: string;
  readonly driver: DriverVersion | null;
}

export interface FileFailure {
  readonly file: string;
  readonly error: unknown;
}

export interface TreeResult {
  readonly path: string;
  /** The path itself, when it names a file that is not a dynamic ELF file: what it is (a wrapper is followed to the program in `files`). */
  readonly named: NamedFile | null;
  readonly files: readonly FileReport[];
  /** Files that are not dynamic ELF files (text, archives, static programs, debug info…). */
  readonly skipped: number;
  readonly failures: readonly FileFailure[];
}

/**
 * A file of a tree, open, when it is a program or library to diagnose; null (closed) for a file
 * without the ELF magic or one skipReason leaves alone. It is read as the loader reads it: a library
 * whose PT_DYNAMIC has no bytes is one the loader refuses, not a damaged file. This one open serves
 * the diagnosis.
 */
async function openDynamic(path: string): Promise<ElfFile | null> {
  const opened = await ElfFile.open(path, AS_THE_LOADER_READS);
  if (opened.kind === 'failed') throw opened.error;
  if (opened.kind === 'not-elf') return null;
  if (skipReason(opened.file.image) === null) return opened.file;
  opened.file.close();
  return null;
}

/** The report of an open dynamic ELF file, which it then closes. */
async function reportOf(
  file: ElfFile,
  context: DoctorContext,
  ldLibraryPath: ByteString | null,
  wrapper: FileReport['wrapper'],
): Promise<FileReport> {
  try {
    return await fileReport(await diagnoseFile(file, context, ldLibraryPath), wrapper);
  } finally {
    file.close();
  }
}

/** Messages for a walk error that say what a person needs (a loop of links more than the errno text). */
function walkError(path: string, error: unknown): unknown {
  const code = ((error as { cause?: NodeJS.ErrnoException }).cause ?? (error as NodeJS.ErrnoException)).code;
  if (code === 'ELOOP')
    return new CudaPatchelfError('io', 'cannot follow: too many levels of symbolic links (a loop)', { file: path, cause: error });
  return error;
}

export function emulationRoot(request: Pick<DoctorRequest, 'root' | 'cwd'>): SystemRoot {
  // Inside a system root the emulated process starts in its '/': this machine's working directory is not part of it.
  return new SystemRoot(request.root ?? '/', request.root === null ? textToByteString(request.cwd) : asciiByteString('/'));
}

/** --driver-lib: the version of a libcuda on this machine, as doctor tells any libcuda's. */
export async function driverVersionOfLibrary(path: string, cwd: string): Promise<DriverVersion | null> {
  const absolute = resolve(cwd, path);
  const facts = await new ObjectFactsCache().get(absolute, statSync(absolute));
  const described = await describeLibcuda(
    textToByteString(absolute),
    facts,
    emulationRoot({ root: null, cwd }),
    new ObjectStrings([]),
    null,
  );
  return described.version === null
    ? null
    : { version: described.version, source: `--driver-lib ${path} (${described.versionSource ?? ''})` };
}

export async function* runDoctor(request: DoctorRequest): AsyncGenerator<TreeResult> {
  const root = emulationRoot(request);
  const ldLibraryPath = request.ldLibraryPath === null ? null : textToByteString(request.ldLibraryPath);
  const registry = new LoaderRegistry(
    { root, ldLibraryPath, hostAbi: hostAbi(request.arch), cpuInfo: readCpuInfo() },
    new ObjectFactsCache(),
  );
  const context = doctorContext(registry, request.driver);
  for (const path of request.paths) {
    const files: FileReport[] = [];
    const failures: FileFailure[] = [];
    let named: NamedFile | null = null;
    let skipped = 0;
    for await (const item of walkTrees([path])) {
      if (item.kind === 'error') {
        failures.push({ file: item.path, error: walkError(item.path, item.error) });
        continue;
      }
      if (item.kind === 'skip') {
        skipped++;
        continue;
      }
      try {
        if (item.named !== undefined) {
          // The path names this file: one that is not a dynamic ELF file is said what it is (in a tree it
          // is only counted). It is reported under the name it was given.
          const nature = await fileNature(item.named);
          if (nature.kind === 'dynamic') {
            files.push(await reportOf(nature.file, context, ldLibraryPath, null));
            continue;
          }
          skipped++;
          const followed = await followNamedFile(item.named, nature, root, ldLibraryPath);
          named = followed.named;
          const { program } = followed;
          if (program !== null)
            files.push(
              await reportOf(program.file, context, program.ldLibraryPath, {
                file: item.named,
                ldLibraryPath: named.runs?.ldLibraryPath ?? null,
              }),
            );
          continue;
        }
        const file = await openDynamic(item.path);
        if (file === null) {
          skipped++;
          continue;
        }
        files.push(await reportOf(file, context, ldLibraryPath, null));
      } catch (error) {
        failures.push({ file: item.path, error });
      }
    }
    yield { path, named, files, skipped, failures };
  }
}
