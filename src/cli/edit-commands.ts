// The editing subcommands: set-runpath, add-runpath, remove-runpath, add-needed, remove-needed,
// replace-needed, set-interpreter. Each edits every file given, says what it changed and how it was written (JSON adds
// the tier), and goes on after failures.

import type { Command } from 'commander';
import { type ByteString, EMPTY_BYTE_STRING, runpathFields, textToByteString } from '../elf/elf.js';
import { editElfFile, type EditOperations, type EditOptions, type EditResult } from '../edit/edit-file.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { addRunpathEntries, type DynamicEditor, removeRunpathEntries, type RunpathTagPolicy } from '../plan/dynamic-editor.js';
import { plannedBytes } from '../plan/plan.js';
import type { CliIo } from './cli-io.js';
import { editLine, watchChanges } from './edit-line.js';
import { forEachFile, rejectEmptyPaths } from './report.js';

interface CommonOptions {
  forceRpath?: boolean;
  output?: string;
  durable?: boolean;
  makeWritable?: boolean;
  dryRun?: boolean;
  json?: boolean;
}

function withCommonOptions(command: Command): Command {
  return command
    .option('--output <file>', 'write the result to FILE and leave the input alone (one input file only)')
    .option('--durable', 'fsync between the data and the header writes')
    .option('--make-writable', 'edit read-only files too (their mode is restored afterwards)')
    .option('--dry-run', 'plan only: say what would change and how it would be written; write nothing')
    .option('--json', 'one JSON array on stdout, an object per file');
}

/** The runpath editors' options: the common ones, and which tag the runpath goes in. */
function withRunpathOptions(command: Command): Command {
  return withCommonOptions(command).option(
    '--force-rpath',
    'write DT_RPATH (converting a DT_RUNPATH) instead of keeping the kind the file has',
  );
}

const FILES = 'ELF files to edit (a symbolic link is followed)';

function resultJson(result: EditResult<readonly string[]>): object {
  return {
    file: result.file,
    tier: result.tier,
    changes: result.answer,
    bytesWritten: result.bytesWritten,
    plannedBytes: plannedBytes(result.plan),
    sizeBefore: result.oldSize,
    sizeAfter: result.plan.newSize,
  };
}

/** Runs `operations` on each file, printing one line (or JSON object) per file. */
async function editFiles(io: CliIo, files: readonly string[], operations: EditOperations, options: CommonOptions): Promise<void> {
  if (options.output === '') throw new CudaPatchelfError('usage', '--output needs a file name');
  if (options.output !== undefined && files.length !== 1) {
    throw new CudaPatchelfError('usage', '--output takes exactly one input file');
  }
  const editOptions: EditOptions = {
    ...(options.output === undefined ? {} : { output: options.output }),
    durable: options.durable === true,
    makeWritable: options.makeWritable === true,
    dryRun: options.dryRun === true,
  };
  rejectEmptyPaths(files, 'files to edit');
  await forEachFile(io, files, options.json === true, async (file) => {
    const result = await editElfFile(file, watchChanges(operations), editOptions);
    return { json: resultJson(result), text: editLine(result, editOptions.dryRun === true) };
  });
}

const policyOf = (options: CommonOptions): RunpathTagPolicy => (options.forceRpath ? 'rpath' : 'keep');
const dirsOf = (value: string): ByteString[] => runpathFields(textToByteString(value));

/**
 * add-runpath's directories. An empty one (an unset variable: `add-runpath "$LIBDIR" lib.so`) would be
 * an empty entry, which the loader takes as the working directory: a usage error, as every other empty
 * argument is.
 */
function addedDirectories(value: string): ByteString[] {
  const dirs = dirsOf(value);
  if (dirs.includes(EMPTY_BYTE_STRING)) {
    throw new CudaPatchelfError(
      'usage',
      `add-runpath: ${value === '' ? 'DIRS is empty' : `"${value}" has an empty entry`}, which the loader takes as the working directory`,
    );
  }
  return dirs;
}

/** The commands that take one DT_NEEDED name and the files. */
const ONE_NEEDED_COMMANDS: readonly {
  readonly name: string;
  readonly description: string;
  readonly library: string;
  readonly edit: (editor: DynamicEditor, library: ByteString) => void;
}[] = [
  {
    name: 'add-needed',
    description: 'add a DT_NEEDED entry (before the existing ones)',
    library: 'the library to add, as DT_NEEDED names it (libfoo.so.1)',
    edit: (editor, library) => editor.addNeeded(library),
  },
  {
    name: 'remove-needed',
    description: 'remove DT_NEEDED entries naming LIBRARY',
    library: 'the DT_NEEDED name to remove (libfoo.so.1)',
    edit: (editor, library) => editor.removeNeeded(library),
  },
];

export function registerEditCommands(program: Command, io: CliIo): void {
  withRunpathOptions(program.command('set-runpath'))
    .description('set the runpath (DT_RUNPATH, or DT_RPATH where the file has that) to VALUE')
    .argument('<value>', 'colon-separated directories')
    .argument('<files...>', FILES)
    .action((value: string, files: string[], options: CommonOptions) =>
      editFiles(io, files, (editor) => editor.setRunpath(textToByteString(value), policyOf(options)), options),
    );

  withRunpathOptions(program.command('add-runpath'))
    .description('add directories to the runpath (before the existing ones unless --append)')
    .argument('<dirs>', 'colon-separated directories')
    .argument('<files...>', FILES)
    .option('--append', 'add after the existing entries')
    .option(
      '--dedupe',
      'keep the first of each directory and no empty entry in the result, as apply does: a directory ' +
        'prepended that the runpath had moves to the front, one appended stays where it was',
    )
    .action((dirs: string, files: string[], options: CommonOptions & { append?: boolean; dedupe?: boolean }) => {
      const added = addedDirectories(dirs);
      return editFiles(
        io,
        files,
        (editor) =>
          editor.setRunpath(
            addRunpathEntries(editor.runpath(), added, options.append ? 'append' : 'prepend', options.dedupe === true),
            policyOf(options),
          ),
        options,
      );
    });

  withRunpathOptions(program.command('remove-runpath'))
    .description('remove directories from the runpath, or the whole runpath with --all')
    .argument('<dirs-or-files...>', 'colon-separated directories, then ELF files to edit (with --all: files only)')
    .option('--all', 'remove DT_RUNPATH and DT_RPATH entirely')
    .action((args: string[], options: CommonOptions & { all?: boolean }) => {
      if (options.all) return editFiles(io, args, (editor) => editor.setRunpath(null), options);
      const [dirs, ...files] = args;
      if (dirs === undefined || files.length === 0)
        throw new CudaPatchelfError('usage', 'remove-runpath needs DIRS and at least one file (or --all and files)');
      return editFiles(
        io,
        files,
        (editor) => editor.setRunpath(removeRunpathEntries(editor.runpath(), dirsOf(dirs)), policyOf(options)),
        options,
      );
    });

  for (const command of ONE_NEEDED_COMMANDS) {
    withCommonOptions(program.command(command.name))
      .description(command.description)
      .argument('<library>', command.library)
      .argument('<files...>', FILES)
      .action((library: string, files: string[], options: CommonOptions) =>
        editFiles(io, files, (editor) => command.edit(editor, textToByteString(library)), options),
      );
  }

  withCommonOptions(program.command('replace-needed'))
    .description('rename a DT_NEEDED entry (and the version needs that name it)')
    .argument('<old>', 'the DT_NEEDED name to rename (libfoo.so.1)')
    .argument('<new>', 'the name it becomes')
    .argument('<files...>', FILES)
    .action((from: string, to: string, files: string[], options: CommonOptions) =>
      editFiles(io, files, (editor) => editor.replaceNeeded(textToByteString(from), textToByteString(to)), options),
    );

  withCommonOptions(program.command('set-interpreter'))
    .description("set a program's interpreter (PT_INTERP, the dynamic loader the kernel starts it with) to PATH")
    .argument('<path>', 'the loader, e.g. /lib64/ld-linux-x86-64.so.2 (not checked to exist: it is looked up when the program runs)')
    .argument('<files...>', 'programs to edit (a symbolic link is followed); a library or a static program is refused')
    .action((path: string, files: string[], options: CommonOptions) => {
      // An empty path is an unset variable: said before any file is read.
      if (path === '')
        throw new CudaPatchelfError('usage', 'set-interpreter needs a path, and an empty one was given (an unset variable?)');
      return editFiles(io, files, (editor) => editor.setInterpreter(textToByteString(path)), options);
    });
}
