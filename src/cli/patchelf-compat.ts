// patchelf's command line for the jobs cuda-patchelf does, with patchelf's semantics, so that scripts
// can call `cuda-patchelf --set-rpath … FILE` where they called patchelf. Per file, the operations run in
// patchelf's order: print interpreter, soname and rpath; then shrink, remove, set or add the rpath; then
// print needed; then remove, replace and add needed libraries.

import { byteStringToText, textToByteString } from '../elf/byte-string.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { EditOperations } from '../edit/edit-file.js';
import { shrinkRunpath } from '../edit/shrink-runpath.js';
import type { CliIo } from './cli-io.js';
import { editFiles } from './edit-commands.js';

interface PatchelfRequest {
  files: string[];
  output?: string;
  setRpath?: string;
  addRpath?: string;
  removeRpath: boolean;
  shrinkRpath: boolean;
  allowedPrefixes: string[];
  forceRpath: boolean;
  printRpath: boolean;
  printNeeded: boolean;
  printSoname: boolean;
  printInterpreter: boolean;
  addNeeded: string[];
  removeNeeded: string[];
  replaceNeeded: [string, string][];
}

/** The flags this mode understands; anything else is a usage error. */
export const PATCHELF_FLAGS = [
  '--set-rpath',
  '--add-rpath',
  '--remove-rpath',
  '--shrink-rpath',
  '--allowed-rpath-prefixes',
  '--force-rpath',
  '--print-rpath',
  '--add-needed',
  '--remove-needed',
  '--replace-needed',
  '--print-needed',
  '--print-soname',
  '--print-interpreter',
  '--output',
  '--debug',
] as const;

export function isPatchelfInvocation(argv: readonly string[]): boolean {
  return argv.some((arg) => (PATCHELF_FLAGS as readonly string[]).includes(arg));
}

function parse(argv: readonly string[]): PatchelfRequest {
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
  };
  let i = 0;
  const value = (flag: string): string => {
    const next = argv[++i];
    if (next === undefined) throw new CudaPatchelfError('usage', `${flag} needs an argument`);
    return textToByteString(next);
  };
  for (; i < argv.length; i++) {
    const arg = argv[i] as string;
    switch (arg) {
      case '--set-rpath': request.setRpath = value(arg); break;
      case '--add-rpath': request.addRpath = value(arg); break;
      case '--remove-rpath': request.removeRpath = true; break;
      case '--shrink-rpath': request.shrinkRpath = true; break;
      case '--allowed-rpath-prefixes': request.allowedPrefixes = value(arg).split(':'); break;
      case '--force-rpath': request.forceRpath = true; break;
      case '--print-rpath': request.printRpath = true; break;
      case '--add-needed': request.addNeeded.push(value(arg)); break;
      case '--remove-needed': request.removeNeeded.push(value(arg)); break;
      case '--replace-needed': request.replaceNeeded.push([value(arg), value(arg)]); break;
      case '--print-needed': request.printNeeded = true; break;
      case '--print-soname': request.printSoname = true; break;
      case '--print-interpreter': request.printInterpreter = true; break;
      case '--output': request.output = byteStringToText(value(arg)); break;
      case '--debug': break;
      default:
        if (arg.startsWith('-')) throw new CudaPatchelfError('usage', `unknown option ${arg} (the patchelf-compatible mode takes: ${PATCHELF_FLAGS.join(' ')})`);
        request.files.push(arg);
    }
  }
  if (request.files.length === 0) throw new CudaPatchelfError('usage', 'no input file');
  return request;
}

function operationsFor(request: PatchelfRequest, io: CliIo): EditOperations {
  const policy = request.forceRpath ? 'rpath' : 'runpath';
  return async (editor, image) => {
    if (request.printInterpreter) {
      if (image.interpreter === null) throw new CudaPatchelfError('unsupported', 'no interpreter (PT_INTERP): the file is a library or statically linked');
      io.out(byteStringToText(image.interpreter));
    }
    if (request.printSoname) {
      const soname = editor.soname();
      if (soname !== null && soname !== '') io.out(byteStringToText(soname));
    }
    if (request.printRpath) io.out(byteStringToText(editor.runpath() ?? ''));
    const old = editor.runpath();
    if (request.shrinkRpath) {
      if (old !== null) {
        const shrunk = await shrinkRunpath(old, editor.needed(), image.header.e_machine, request.allowedPrefixes);
        if (shrunk !== old) editor.setRunpath(shrunk, policy);
      }
    } else if (request.removeRpath) editor.setRunpath(null);
    else if (request.setRpath !== undefined) editor.setRunpath(request.setRpath, policy);
    else if (request.addRpath !== undefined) editor.setRunpath(old === null || old === '' ? request.addRpath : `${old}:${request.addRpath}`, policy);
    if (request.printNeeded) for (const name of editor.needed()) io.out(byteStringToText(name));
    for (const name of request.removeNeeded) editor.removeNeeded(name);
    for (const [from, to] of request.replaceNeeded) editor.replaceNeeded(from, to);
    // patchelf keeps the names in a sorted set and inserts them as one block before the others.
    for (const name of [...new Set(request.addNeeded)].sort().reverse()) editor.addNeeded(name);
  };
}

export async function runPatchelfCompat(argv: readonly string[], io: CliIo): Promise<void> {
  const request = parse(argv);
  await editFiles(io, request.files, operationsFor(request, io), { ...(request.output === undefined ? {} : { output: request.output }), quiet: true });
}
