// The command tree. Usage errors exit 2 with one `cuda-patchelf:` line (1 in the patchelf-compatible
// mode, as patchelf); each command sets its own code.

import { Command, CommanderError } from 'commander';
import { EXIT } from './exit-codes.js';
import { registerEditCommands } from './edit-commands.js';
import { registerTreeCommands } from './tree-commands.js';
import { registerPrint } from './print-command.js';
import { registerDoctor } from './register-doctor.js';
import { isPatchelfInvocation, patchelfHelp } from './patchelf-arguments.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { errorLine } from './report.js';
import type { CliIo } from './cli-io.js';
import { DOCS_DIR, README_PATH, VERSION } from './package-files.js';


export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let exitCode: number = EXIT.ok;
  const recordingIo: CliIo = { ...io, setExitCode: (code) => (exitCode = code) };
  const program = new Command('cuda-patchelf')
    .description('fix the runpaths of CUDA binaries: read, plan and patch DT_RUNPATH / DT_RPATH / DT_NEEDED')
    .version(VERSION)
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.out(s.trimEnd()),
      writeErr: (s) => io.err(s.trimEnd()),
      // Every error line in one style, commander's and the commands' own: `cuda-patchelf: …`.
      outputError: (s, write) => write(s.trimEnd().split('\n').map((line) => `cuda-patchelf: ${line.replace(/^error: /, '')}`).join('\n')),
    })
    .addHelpText('after', `\n${patchelfHelp()}\n\nDocumentation: ${README_PATH} and ${DOCS_DIR}/`);
  registerPrint(program, recordingIo);
  registerDoctor(program, recordingIo);
  registerEditCommands(program, recordingIo);
  registerTreeCommands(program, recordingIo);
  try {
    // A subcommand's own --output or --force-rpath must not send it to the patchelf-compatible mode.
    const subcommand = program.commands.some((command) => command.name() === argv[0]);
    // The patchelf-compatible mode is loaded only when it runs (the other commands start without it).
    if (!subcommand && isPatchelfInvocation(argv)) await (await import('./patchelf-compat.js')).runPatchelfCompat(argv, recordingIo);
    else await program.parseAsync(argv, { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end through here too, with exit code 0.
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (error instanceof CudaPatchelfError && error.kind === 'usage') {
      io.err(errorLine(error));
      return EXIT.usage;
    }
    throw error;
  }
  return exitCode;
}
