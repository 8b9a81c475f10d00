// A file named on the command line that is not a dynamic ELF file: doctor says what it is instead of
// counting it as skipped (a tree's other files are only counted). A shell wrapper (Nixpkgs'
// makeWrapper) is followed to the program it runs, with the LD_LIBRARY_PATH it gives it, and that
// program is diagnosed in its stead; anything else is a finding, since doctor could not check it.

import {
  type ByteString,
  bytesToByteString,
  byteStringToText,
  ElfFile,
  ET,
  FileByteSource,
  fileKind,
  PT,
  sliceByteString,
} from '../elf/elf.js';
import { skipReason } from '../edit/skip-reason.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { Finding } from './findings.js';
import { AS_THE_LOADER_READS } from '../loader/object-facts.js';
import { readShellWrapper } from './shell-wrapper.js';
import type { SystemRoot } from '../loader/system-root.js';

/** What a file is, when it is not a program or library the loader loads. */
export type NotDynamicKind =
  | 'script'
  | 'static'
  | 'static-pie'
  | 'relocatable'
  | 'core'
  | 'debug-info'
  | 'no-dynamic-section'
  | 'archive'
  | 'empty'
  | 'not-elf';

export type FileNature =
  /** A dynamic ELF file, left open for the caller to diagnose and close. */
  | { readonly kind: 'dynamic'; readonly file: ElfFile }
  | { readonly kind: 'script'; readonly text: ByteString }
  | { readonly kind: Exclude<NotDynamicKind, 'script'> };

/** A wrapper is a page or two of shell; a larger script is not read whole. */
const MAX_SCRIPT = 64 * 1024;

/**
 * An ELF file the loader does not load, by what it is: skipReason, told from a library the loader refuses for want of a dynamic
 * section.
 */
function elfNature(file: ElfFile): FileNature {
  const reason = skipReason(file.image);
  if (reason === null) return { kind: 'dynamic', file };
  const emptyDynamic = file.header.e_type === ET.ET_DYN && file.programHeaders.some((ph) => ph.p_type === PT.PT_DYNAMIC);
  return { kind: reason === 'static' && emptyDynamic ? 'no-dynamic-section' : reason };
}

/** What the file open in `source` is, by its first bytes (its first 64 KiB: a script's text). */
async function natureOf(source: FileByteSource): Promise<FileNature> {
  if (source.size === 0) return { kind: 'empty' };
  const head = await source.read(0, Math.min(source.size, MAX_SCRIPT), 'first bytes');
  const kind = fileKind(head);
  if (kind === 'elf') return elfNature(await ElfFile.read(source, AS_THE_LOADER_READS));
  if (kind === 'archive') return { kind: 'archive' };
  const text = bytesToByteString(head);
  if (text.startsWith('#!'))
    return { kind: 'script', text: source.size <= MAX_SCRIPT ? text : sliceByteString(text, 0, text.indexOf('\n') + 1) };
  return { kind: 'not-elf' };
}

/**
 * What the file at `hostPath` is: a dynamic ELF file (left open: the caller closes it), a script
 * (with its text, as a byte string), or something else. ELF files are read as the loader reads them
 * (a PT_DYNAMIC without bytes is none). Errors name the file.
 */
export async function fileNature(hostPath: string): Promise<FileNature> {
  const source = FileByteSource.open(hostPath);
  let nature: FileNature;
  try {
    nature = await natureOf(source);
  } catch (error) {
    source.close();
    throw error instanceof CudaPatchelfError ? error.withFile(hostPath) : error;
  }
  if (nature.kind !== 'dynamic') source.close();
  return nature;
}

/** What each kind is, in words, and what doctor can make of it. */
const NOT_DYNAMIC: Readonly<Record<Exclude<NotDynamicKind, 'script'>, { what: string; fix: string }>> = {
  static: {
    what: 'a statically linked program: no loader loads it, and it has no runpath',
    fix:
      'nothing for the loader to find; a static program that uses CUDA opens libcuda.so.1 through ' +
      'LD_LIBRARY_PATH, ld.so.cache and the default directories only',
  },
  'static-pie': {
    what: 'a static-pie program: it relocates itself, no loader loads it, and it has no runpath',
    fix:
      'nothing for the loader to find; a static program that uses CUDA opens libcuda.so.1 through ' +
      'LD_LIBRARY_PATH, ld.so.cache and the default directories only',
  },
  relocatable: {
    what: 'an object file (ET_REL): it is linked into a program, not loaded',
    fix: 'name the program or library it is linked into',
  },
  core: { what: 'a core dump', fix: 'name the program that dumped it' },
  'debug-info': {
    what: 'a debug-info file (objcopy --only-keep-debug): nothing loads it',
    fix: 'name the program or library it belongs to',
  },
  'no-dynamic-section': {
    what: 'a library whose PT_DYNAMIC has no bytes: the loader refuses it ("object file has no dynamic section")',
    fix: 'rebuild or replace it',
  },
  archive: { what: 'an archive (a static library): it is linked, not loaded', fix: 'name the program or library it is linked into' },
  empty: { what: 'an empty file', fix: 'name a program or library' },
  'not-elf': { what: 'not an ELF file', fix: 'name a program or library' },
};

export interface NamedFile {
  /** The file as it was named, on this machine (absolute). */
  readonly file: string;
  readonly kind: NotDynamicKind;
  /** What it is, in words. */
  readonly description: string;
  /** A script's `#!` line; null for other files. */
  readonly interpreter: string | null;
  /**
   * The program the wrapper (and the wrappers it runs) end in, diagnosed in the file's stead: on this machine, as the emulated
   * system names it, and the LD_LIBRARY_PATH it gets; null when there is none.
   */
  readonly runs: { readonly file: string; readonly path: string; readonly ldLibraryPath: string | null } | null;
  readonly findings: readonly Finding[];
}

export interface FollowedFile {
  readonly named: NamedFile;
  /**
   * The program to diagnose in the named file's stead (open: the caller closes it), and its
   * LD_LIBRARY_PATH as a byte string; null when there is none.
   */
  readonly program: { readonly file: ElfFile; readonly ldLibraryPath: ByteString | null } | null;
}

/** Wrappers that run wrappers (wrapProgram twice) are followed this far. */
const MAX_WRAPPERS = 8;

const LOADED_ONLY = 'doctor checks programs and libraries the loader loads';

function notDiagnosed(message: string, fix: string): Finding {
  return { severity: 'error', code: 'not-dynamic-elf', message, fix };
}

/** A script that doctor follows no further: what it is, and the findings with the one that says why. */
function stopped(
  file: string,
  interpreter: string,
  findings: readonly Finding[],
  description: string,
  message: string,
  fix: string,
): FollowedFile {
  return {
    named: {
      file,
      kind: 'script',
      description,
      interpreter,
      runs: null,
      findings: [...findings, notDiagnosed(`${file} is ${message}: ${LOADED_ONLY}`, fix)],
    },
    program: null,
  };
}

/** The first line of a script, as text. */
function shebangOf(text: ByteString): string {
  const end = text.indexOf('\n');
  return byteStringToText(end < 0 ? text : sliceByteString(text, 0, end));
}

/**
 * A named file that is not a dynamic ELF file (`nature` is what fileNature found): a shell wrapper is
 * followed through the wrappers it runs to a program, which the caller diagnoses; anything else, or a
 * wrapper that ends elsewhere, is a finding. `ldLibraryPath` is the emulated one the first script
 * starts with (a byte string, null when unset).
 */
export async function followNamedFile(
  hostPath: string,
  nature: Exclude<FileNature, { kind: 'dynamic' }>,
  root: SystemRoot,
  ldLibraryPath: ByteString | null,
): Promise<FollowedFile> {
  if (nature.kind !== 'script') {
    const { what, fix } = NOT_DYNAMIC[nature.kind];
    return {
      named: {
        file: hostPath,
        kind: nature.kind,
        description: what,
        interpreter: null,
        runs: null,
        findings: [notDiagnosed(`${hostPath} is ${what}: ${LOADED_ONLY}`, fix)],
      },
      program: null,
    };
  }
  const interpreter = shebangOf(nature.text);
  const findings: Finding[] = [];
  let text = nature.text;
  let llp = ldLibraryPath;
  // The script being read: the named file, then each wrapper it runs.
  let current = hostPath;
  // What the named file is, grown as each wrapper is followed: "a shell wrapper (#!…) that runs X".
  let description = `a script (${interpreter})`;
  for (let depth = 0; depth < MAX_WRAPPERS; depth++) {
    const reading = readShellWrapper(text, llp);
    if (reading === null || reading.program === null) {
      const ending = depth === 0 ? description : `${description}, a script (${shebangOf(text)})`;
      return stopped(
        hostPath,
        interpreter,
        findings,
        ending,
        `${ending} that ends in no exec of a program doctor can follow`,
        "name the program the script runs (doctor follows a wrapper that ends in `exec /absolute/path`, as Nixpkgs' makeWrapper writes it)",
      );
    }
    const program = byteStringToText(reading.program);
    for (const line of reading.unfollowed) {
      findings.push({
        severity: 'warning',
        code: 'wrapper-environment',
        message:
          `${current} changes LD_LIBRARY_PATH in a line doctor does not follow ` +
          `(${byteStringToText(line)}): ${program} is diagnosed without that change`,
        fix: 'check that line by hand, or name the program and give doctor the value it gets with --ld-library-path',
      });
    }
    llp = reading.ldLibraryPath;
    description = depth === 0 ? `a shell wrapper (${interpreter}) that runs ${program}` : `${description}, a wrapper that runs ${program}`;
    const target = root.lookUp(reading.program);
    if (!target.ok)
      return stopped(
        hostPath,
        interpreter,
        findings,
        description,
        `${description}, which does not exist here (${target.code})`,
        'install the program the wrapper runs, or name the program',
      );
    const next = await fileNature(target.hostPath);
    if (next.kind === 'dynamic') {
      const runs = { file: target.hostPath, path: program, ldLibraryPath: llp === null ? null : byteStringToText(llp) };
      return {
        named: { file: hostPath, kind: 'script', description, interpreter, runs, findings },
        program: { file: next.file, ldLibraryPath: llp },
      };
    }
    if (next.kind !== 'script')
      return stopped(
        hostPath,
        interpreter,
        findings,
        description,
        `${description}, which is ${NOT_DYNAMIC[next.kind].what}`,
        NOT_DYNAMIC[next.kind].fix,
      );
    text = next.text;
    current = program;
  }
  return stopped(
    hostPath,
    interpreter,
    findings,
    description,
    `${description}: wrappers that run wrappers more than ${MAX_WRAPPERS} deep, which doctor stops following`,
    'name the program the wrappers run',
  );
}
