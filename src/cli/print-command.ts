// `cuda-patchelf print FILE...`: what the tool sees in each file; `print-interpreter FILE...`: the
// interpreter path alone.

import type { Command } from 'commander';
import {
  type ByteString,
  byteStringToText,
  CUDA_COMPAT_NOTE_SECTION,
  describeCudaCompatNote,
  type ElfFile,
  withElfFile,
} from '../elf/elf.js';
import { CudaPatchelfError, oneLine } from '../errors/cuda-patchelf-error.js';
import { summarize, type ElfSummary } from '../edit/summary.js';
import { forEachFile, rejectEmptyPaths } from './report.js';
import type { CliIo } from './cli-io.js';
import { docPath } from './package-files.js';

const hex = (value: number): string => `0x${value.toString(16)}`;

function text(value: ByteString | null): string {
  return value === null ? '-' : byteStringToText(value);
}

/** The summary as `print --json` shows it: its byte strings decoded. */
type SummaryOutput = Omit<ElfSummary, 'interpreter' | 'soname' | 'needed' | 'rpath' | 'runpath'> & {
  readonly interpreter: string | null;
  readonly soname: string | null;
  readonly needed: string[];
  readonly rpath: string | null;
  readonly runpath: string | null;
};

/** The summary with byte strings decoded for output. */
function summaryForOutput(summary: ElfSummary): SummaryOutput {
  return {
    ...summary,
    interpreter: summary.interpreter === null ? null : byteStringToText(summary.interpreter),
    soname: summary.soname === null ? null : byteStringToText(summary.soname),
    needed: summary.needed.map(byteStringToText),
    rpath: summary.rpath === null ? null : byteStringToText(summary.rpath),
    runpath: summary.runpath === null ? null : byteStringToText(summary.runpath),
  };
}

function humanLines(file: string, s: ElfSummary): string[] {
  const kindRow: [string, string][] = s.debugInfo ? [['kind', 'debug-info (objcopy --only-keep-debug; no dynamic data)']] : [];
  const compatRow: [string, string][] =
    s.cudaCompat === null
      ? []
      : [['cuda compat', 'error' in s.cudaCompat ? `unreadable note (${s.cudaCompat.error})` : describeCudaCompatNote(s.cudaCompat)]];
  const rows: [string, string][] = [
    ['class', s.class],
    ['byte order', s.byteOrder],
    ['machine', s.machine],
    ['type', s.type],
    ...kindRow,
    ['interpreter', text(s.interpreter)],
    ['soname', text(s.soname)],
    ['needed', s.needed.length === 0 ? '-' : s.needed.map(byteStringToText).join(' ')],
    ['rpath', text(s.rpath)],
    ['runpath', text(s.runpath)],
    ['flags', s.flags.length === 0 ? '-' : s.flags.join(' ')],
    ['flags_1', s.flags1.length === 0 ? '-' : s.flags1.join(' ')],
    ...s.loads.map((load, i): [string, string] => [
      i === 0 ? 'loads' : '',
      `${load.flags} offset ${hex(load.offset)} vaddr ${hex(load.vaddr)} filesz ${hex(load.filesz)} ` +
        `memsz ${hex(load.memsz)} align ${hex(load.align)}`,
    ]),
    ['spare slots', s.spareDynamicSlots === null ? '-' : `${s.spareDynamicSlots} DT_NULL`],
    ...compatRow,
    ['apply', s.visit ? 'visits (dynamic ELF)' : `skips (${s.skipReason ?? ''})`],
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  return [file, ...rows.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`)];
}

/** A program's interpreter path (a byte string); a file without one, or a debug-info file, is refused. */
export function interpreterOf(file: ElfFile): ByteString {
  if (file.image.debugInfo)
    throw new CudaPatchelfError('unsupported', 'a debug-info file (objcopy --only-keep-debug): the interpreter path is not in it');
  if (file.interpreter === null)
    throw new CudaPatchelfError('unsupported', 'no interpreter (PT_INTERP): the file is a library or statically linked');
  return file.interpreter;
}

export function registerPrint(program: Command, io: CliIo): void {
  program
    .command('print')
    .description('show class, machine, type, interpreter, soname, needed, rpath, runpath, flags, loads and spare dynamic slots')
    .argument('<files...>', 'ELF files to describe')
    .option('--json', `one JSON array on stdout, an object per file (see ${docPath('patchelf-compat.md')}, print --json)`)
    .action(async (files: string[], options: { json?: boolean }) => {
      rejectEmptyPaths(files, 'files to describe');
      await forEachFile(io, files, options.json === true, async (file) => {
        const summary = await withElfFile(file, (elf) => summarize(elf.image));
        if (summary.cudaCompat !== null && 'error' in summary.cudaCompat)
          io.err(`cuda-patchelf: ${oneLine(file)}: warning: ${CUDA_COMPAT_NOTE_SECTION} cannot be read: ${summary.cudaCompat.error}`);
        return { json: { file, ...summaryForOutput(summary) }, text: humanLines(file, summary).join('\n') };
      });
    });
  program
    .command('print-interpreter')
    .description("print each program's interpreter (PT_INTERP), one line per file")
    .argument('<files...>', 'programs to read; a library or a static program fails')
    .option('--json', 'one JSON array on stdout, an object per file: file, interpreter')
    .action(async (files: string[], options: { json?: boolean }) => {
      rejectEmptyPaths(files, 'files to read');
      await forEachFile(io, files, options.json === true, async (file) => {
        const interpreter = byteStringToText(await withElfFile(file, async (elf) => interpreterOf(elf)));
        return { json: { file, interpreter }, text: interpreter };
      });
    });
}
