// The patchelf-compatible mode: what a patchelf command line asks (patchelf-arguments.ts), done as
// patchelf does it, so that scripts can call `cuda-patchelf --set-rpath … FILE` where they called
// patchelf: silence on success and exit status 1 on any failure. Per file, patchelf's order: print the
// interpreter, soname and rpath; set the interpreter; shrink, remove, set or add the rpath; print the needed libraries;
// remove, replace and add needed libraries. Unlike patchelf, a failing file does not stop the others.

import type { Stats } from 'node:fs';
import {
  asciiByteString,
  type ByteString,
  byteStringToText,
  concatByteStrings,
  DT,
  type ElfFile,
  EMPTY_BYTE_STRING,
  ET,
  withElfFile,
} from '../elf/elf.js';
import { editElfFile, type EditOperations } from '../edit/edit-file.js';
import { shrinkRunpath } from '../edit/shrink-runpath.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { outputIsInput, writeOutput } from '../write/output-file.js';
import type { CliIo } from './cli-io.js';
import { editLine, watchChanges } from './edit-line.js';
import { EXIT } from './exit-codes.js';
import { parsePatchelfArguments, type PatchelfRequest } from './patchelf-arguments.js';
import { interpreterOf } from './print-command.js';
import { errorLine, forEachFile } from './report.js';

/** patchelf exits 1 on every failure, a wrong command line included. */
const PATCHELF_FAILURE = 1;

const DEBUG_INFO = 'a debug-info file (objcopy --only-keep-debug)';

const COLON = asciiByteString(':');

/**
 * The queries, answered from the file as it is: patchelf prints before it edits, and no edit changes
 * what a later query reads. Lines go out as they are found, so a failing query ends the file's output
 * where patchelf's would end. A debug-info file has no dynamic entries to print; patchelf prints
 * nothing for its runpath (its .dynamic is SHT_NOBITS) and reads whatever bytes lie at that offset
 * for the other queries, so those answers follow from the file having no entries.
 */
async function printQueries(file: ElfFile, request: PatchelfRequest, io: CliIo): Promise<void> {
  const { debugInfo } = file.image;
  if (request.printInterpreter) io.out(byteStringToText(interpreterOf(file)));
  // patchelf looks for a soname in shared objects (ET_DYN) only.
  if (request.printSoname && file.header.e_type === ET.ET_DYN) {
    const soname = await file.lastDynString(DT.DT_SONAME);
    if (soname !== null && soname !== '') io.out(byteStringToText(soname));
  }
  const needsDynamic = request.printRpath || request.printNeeded;
  if (needsDynamic && file.image.dynamic === null && !debugInfo)
    throw new CudaPatchelfError('format', 'no dynamic section (PT_DYNAMIC): the file is statically linked');
  if (request.printRpath && !debugInfo) {
    const runpath = await file.lastDynString(DT.DT_RUNPATH);
    io.out(byteStringToText(runpath ?? (await file.lastDynString(DT.DT_RPATH)) ?? EMPTY_BYTE_STRING));
  }
  if (request.printNeeded) for (const name of await file.dynStrings(DT.DT_NEEDED)) io.out(byteStringToText(name));
}

function hasEdits(request: PatchelfRequest): boolean {
  const rpath = request.shrinkRpath || request.removeRpath || request.setRpath !== undefined || request.addRpath !== undefined;
  const needed = request.addNeeded.length > 0 || request.removeNeeded.length > 0 || request.replaceNeeded.length > 0;
  return rpath || needed || interpreterEdit(request) !== null;
}

/** The interpreter to set: patchelf 0.18 takes an empty --set-interpreter value as none. */
function interpreterEdit(request: PatchelfRequest): ByteString | null {
  return request.setInterpreter === undefined || request.setInterpreter === '' ? null : request.setInterpreter;
}

function editsOf(request: PatchelfRequest): EditOperations {
  const policy = request.forceRpath ? 'rpath' : 'runpath';
  const interpreter = interpreterEdit(request);
  return async (editor, image) => {
    if (interpreter !== null) editor.setInterpreter(interpreter);
    const old = editor.runpath();
    // Like --set-rpath, a shrink converts DT_RPATH to DT_RUNPATH (or back with --force-rpath), shorter or not.
    if (request.shrinkRpath) {
      if (old !== null)
        editor.setRunpath(await shrinkRunpath(old, editor.needed(), image.header.e_machine, request.allowedPrefixes), policy);
    } else if (request.removeRpath) editor.setRunpath(null);
    else if (request.setRpath !== undefined) editor.setRunpath(request.setRpath, policy);
    else if (request.addRpath !== undefined)
      editor.setRunpath(old === null || old === '' ? request.addRpath : concatByteStrings(old, COLON, request.addRpath), policy);
    for (const name of request.removeNeeded) editor.removeNeeded(name);
    for (const [from, to] of request.replaceNeeded) editor.replaceNeeded(from, to);
    // patchelf keeps the names in a sorted set and inserts them as one block before the others.
    for (const name of [...new Set(request.addNeeded)].sort().reverse()) editor.addNeeded(name);
  };
}

/**
 * A debug-info file, as patchelf leaves it: the runpath flags do nothing (its .dynamic is SHT_NOBITS),
 * nor do removing or renaming needed libraries it has none of. --output still gets its copy, as
 * patchelf always writes the output file.
 */
async function keepDebugInfo(file: string, stats: Stats, request: PatchelfRequest, io: CliIo): Promise<void> {
  if (request.output !== undefined && !outputIsInput(request.output, stats)) writeOutput(file, request.output, null);
  if (request.debug && hasEdits(request)) io.err(`${file}: ${DEBUG_INFO}, no dynamic section: nothing written`);
}

async function patchelfFile(file: string, request: PatchelfRequest, io: CliIo): Promise<void> {
  const { debugInfo, stats } = await withElfFile(file, async (elf) => {
    await printQueries(elf, request, io);
    return { debugInfo: elf.image.debugInfo, stats: elf.stats };
  });
  // Adding a needed library or setting the interpreter has nowhere to go: the edit refuses the file as the editing commands do.
  if (debugInfo && request.addNeeded.length === 0 && interpreterEdit(request) === null) return keepDebugInfo(file, stats, request, io);
  // patchelf always writes --output, changed or not.
  if (!hasEdits(request) && request.output === undefined) return;
  const result = await editElfFile(file, watchChanges(editsOf(request)), {
    makeWritable: request.makeWritable,
    ...(request.output === undefined ? {} : { output: request.output }),
  });
  if (request.debug) io.err(editLine(result, false));
}

export async function runPatchelfCompat(argv: readonly string[], io: CliIo): Promise<void> {
  let request: PatchelfRequest;
  try {
    request = await parsePatchelfArguments(argv);
  } catch (error) {
    if (!(error instanceof CudaPatchelfError)) throw error;
    io.err(errorLine(error));
    io.setExitCode(PATCHELF_FAILURE);
    return;
  }
  const patchelfCodes: CliIo = { ...io, setExitCode: (code) => io.setExitCode(code === EXIT.ok ? EXIT.ok : PATCHELF_FAILURE) };
  await forEachFile(patchelfCodes, request.files, false, async (file) => {
    await patchelfFile(file, request, io);
    return { json: {}, text: null };
  });
}
