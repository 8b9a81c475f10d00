// The patchelf-compatible mode's command line: the patchelf flags it takes, read as patchelf reads
// them (`@FILE` values included), which command lines are patchelf's, and the --help text for them.

import { readFile } from 'node:fs/promises';
import { ioError } from '../errors/io-error.js';
import {
  asciiByteString,
  type ByteString,
  bytesToByteString,
  byteStringToText,
  EMPTY_BYTE_STRING,
  splitByteString,
  textToByteString,
} from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { rejectEmptyPaths } from './report.js';

interface FlagSpec {
  readonly flag: string;
  /** The values it takes, as --help names them. */
  readonly values: readonly string[];
  /** patchelf reads `@FILE` as FILE's contents for this flag's value. */
  readonly fromFile: boolean;
  readonly help: string;
}

const flag = (name: string, help: string, values: readonly string[] = [], fromFile = false): FlagSpec => ({
  flag: name,
  values,
  fromFile,
  help,
});

/**
 * The patchelf flags this mode takes, with patchelf's meaning, and --make-writable: a read-only file is
 * refused here as by every command, and the refusal names that flag.
 */
const PATCHELF_FLAGS: readonly FlagSpec[] = [
  flag('--set-rpath', 'set DT_RUNPATH (a DT_RPATH is converted)', ['RUNPATH'], true),
  flag('--add-rpath', 'append directories to the runpath', ['RUNPATH'], true),
  flag('--remove-rpath', 'remove DT_RUNPATH and DT_RPATH'),
  flag('--shrink-rpath', 'keep only the directories that hold a needed library'),
  flag('--allowed-rpath-prefixes', 'with --shrink-rpath, keep only directories under these', ['PREFIXES']),
  flag('--force-rpath', 'write DT_RPATH instead of DT_RUNPATH'),
  flag('--print-rpath', 'print DT_RUNPATH, else DT_RPATH'),
  flag('--add-needed', 'add a DT_NEEDED entry', ['LIBRARY'], true),
  flag('--remove-needed', 'remove a DT_NEEDED entry', ['LIBRARY'], true),
  flag('--replace-needed', 'rename a DT_NEEDED entry', ['LIBRARY', 'NEW_LIBRARY']),
  flag('--print-needed', 'print the DT_NEEDED entries'),
  flag('--print-soname', "print a library's DT_SONAME"),
  flag('--print-interpreter', "print a program's interpreter (PT_INTERP)"),
  flag('--set-interpreter', "set a program's interpreter (PT_INTERP); an empty value changes nothing", ['INTERPRETER'], true),
  flag('--interpreter', 'the same as --set-interpreter', ['INTERPRETER'], true),
  flag('--output', 'write the result to FILE, leave the input alone', ['FILE'], true),
  flag('--debug', 'say on stderr what changed in each edited file'),
  flag('--make-writable', "edit a read-only file too, its mode put back (cuda-patchelf's own flag)"),
];

const SPEC_OF = new Map(PATCHELF_FLAGS.map((spec) => [spec.flag, spec]));

/** patchelf's flags for what cuda-patchelf does not do: named as such, not as unknown. */
const NOT_TAKEN = new Set([
  '--page-size',
  '--print-os-abi',
  '--set-os-abi',
  '--set-soname',
  '--no-default-lib',
  '--no-sort',
  '--clear-symbol-version',
  '--add-debug-tag',
  '--print-execstack',
  '--clear-execstack',
  '--set-execstack',
  '--rename-dynamic-symbols',
]);

/** cuda-patchelf's own options before a command; commander answers them. */
const OWN_OPTIONS = new Set(['-h', '--help', '-V', '--version']);

/**
 * cuda-patchelf's own command lines start with a command: one that names a patchelf flag, or starts
 * with any option but its own, is patchelf's (so an unknown one fails with patchelf's exit status).
 */
export function isPatchelfInvocation(argv: readonly string[]): boolean {
  const first = argv[0];
  if (first?.startsWith('-') && !OWN_OPTIONS.has(first)) return true;
  return argv.some((arg) => SPEC_OF.has(arg) || NOT_TAKEN.has(arg));
}

/** The section of `cuda-patchelf --help` that documents this mode. */
export function patchelfHelp(): string {
  const usage = PATCHELF_FLAGS.map((spec) => [spec.flag, ...spec.values].join(' '));
  const width = Math.max(...usage.map((text) => text.length));
  const fromFile = PATCHELF_FLAGS.filter((spec) => spec.fromFile).map((spec) => spec.flag);
  return [
    "patchelf-compatible mode: patchelf's flags instead of a command, with patchelf's meaning",
    '  cuda-patchelf --set-rpath /run/opengl-driver/lib libfoo.so',
    ...PATCHELF_FLAGS.map((spec, i) => `    ${(usage[i] ?? '').padEnd(width)}  ${spec.help}`),
    `  @FILE as the value of ${fromFile.slice(0, -1).join(', ')} or ${fromFile.at(-1) ?? ''}`,
    "  is FILE's contents, byte for byte (a final newline included), as patchelf reads it.",
    '  Nothing is printed but what --print-* asks for; --debug adds one line per edited file on stderr.',
    "  Exit status 0, or 1 on any failure (a wrong command line included), as patchelf's.",
    '  A debug-info file (objcopy --only-keep-debug) has no dynamic section: the runpath flags leave it',
    '  byte-identical and succeed, as patchelf does.',
  ].join('\n');
}

/** What a patchelf command line asks: files and --output as text (paths), the flags' values as byte strings. */
export interface PatchelfRequest {
  files: string[];
  output?: string;
  /** The new interpreter path; an empty one is no edit, as in patchelf 0.18. */
  setInterpreter?: ByteString;
  setRpath?: ByteString;
  addRpath?: ByteString;
  removeRpath: boolean;
  shrinkRpath: boolean;
  allowedPrefixes: ByteString[];
  forceRpath: boolean;
  printRpath: boolean;
  printNeeded: boolean;
  printSoname: boolean;
  printInterpreter: boolean;
  addNeeded: ByteString[];
  removeNeeded: ByteString[];
  replaceNeeded: [ByteString, ByteString][];
  debug: boolean;
  makeWritable: boolean;
}

const usageError = (message: string): CudaPatchelfError => new CudaPatchelfError('usage', message);

/** A flag's value as a byte string: the argument's UTF-8 bytes, or FILE's bytes for `@FILE` where patchelf reads it. */
async function resolveValue(spec: FlagSpec, argument: string): Promise<ByteString> {
  if (!spec.fromFile || !argument.startsWith('@')) return textToByteString(argument);
  const path = argument.slice(1);
  if (path === '') throw usageError(`${spec.flag} @: no file name after @`);
  let value: ByteString;
  try {
    value = bytesToByteString(await readFile(path));
  } catch (error) {
    throw ioError(path, `read the value of ${spec.flag}`, error);
  }
  // patchelf would cut the value there; a name or runpath cannot hold one, so it is refused.
  if (value.includes('\0')) throw usageError(`${spec.flag} ${argument}: the file holds a NUL byte, which a runpath or a file name cannot`);
  return value;
}

/** The request a patchelf command line makes; usage errors for what patchelf would refuse, or what this mode does not take. */
export async function parsePatchelfArguments(argv: readonly string[]): Promise<PatchelfRequest> {
  const request: PatchelfRequest = {
    files: [],
    removeRpath: false,
    shrinkRpath: false,
    allowedPrefixes: [],
    forceRpath: false,
    printRpath: false,
    printNeeded: false,
    printSoname: false,
    printInterpreter: false,
    addNeeded: [],
    removeNeeded: [],
    replaceNeeded: [],
    debug: false,
    makeWritable: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const spec = SPEC_OF.get(arg);
    if (spec === undefined) {
      if (NOT_TAKEN.has(arg))
        throw usageError(`${arg} is a patchelf flag the patchelf-compatible mode does not take (see cuda-patchelf --help)`);
      if (arg.startsWith('-') && arg !== '-') throw usageError(`unknown option '${arg}'`);
      request.files.push(arg);
      continue;
    }
    const values: ByteString[] = [];
    for (let n = 0; n < spec.values.length; n++) {
      const argument = argv[++i];
      if (argument === undefined) throw usageError(`${arg} needs ${spec.values.join(' ')}`);
      values.push(await resolveValue(spec, argument));
    }
    const [first = EMPTY_BYTE_STRING, second = EMPTY_BYTE_STRING] = values;
    switch (arg) {
      case '--set-interpreter':
      case '--interpreter':
        request.setInterpreter = first;
        break;
      case '--set-rpath':
        request.setRpath = first;
        break;
      case '--add-rpath':
        request.addRpath = first;
        break;
      case '--remove-rpath':
        request.removeRpath = true;
        break;
      case '--shrink-rpath':
        request.shrinkRpath = true;
        break;
      case '--allowed-rpath-prefixes':
        request.allowedPrefixes = splitByteString(first, asciiByteString(':'));
        break;
      case '--force-rpath':
        request.forceRpath = true;
        break;
      case '--print-rpath':
        request.printRpath = true;
        break;
      case '--add-needed':
        request.addNeeded.push(first);
        break;
      case '--remove-needed':
        request.removeNeeded.push(first);
        break;
      case '--replace-needed':
        request.replaceNeeded.push([first, second]);
        break;
      case '--print-needed':
        request.printNeeded = true;
        break;
      case '--print-soname':
        request.printSoname = true;
        break;
      case '--print-interpreter':
        request.printInterpreter = true;
        break;
      case '--output':
        request.output = byteStringToText(first);
        break;
      case '--debug':
        request.debug = true;
        break;
      case '--make-writable':
        request.makeWritable = true;
        break;
    }
  }
  if (request.files.length === 0) throw usageError('no input file');
  // patchelf would try to open "" and fail; an empty name is an unset variable, said as such.
  rejectEmptyPaths(request.files, 'files to edit');
  if (request.output === '') throw usageError('--output needs a file name');
  if (request.output !== undefined && request.files.length !== 1) throw usageError('--output takes exactly one input file');
  if (request.setRpath !== undefined && request.addRpath !== undefined)
    throw usageError('--set-rpath and --add-rpath cannot be used together');
  return request;
}
