// The command tree. Usage errors exit 2 with one `cuda-patchelf:` line (1 in the patchelf-compatible
// mode, as patchelf); each command sets its own code.

import { Command, CommanderError } from 'commander';
import { EXIT, EXIT_CODES_HELP } from './exit-codes.js';
import { registerEditCommands } from './edit-commands.js';
import { registerTreeCommands } from './tree-commands.js';
import { registerPrint } from './print-command.js';
import { registerDoctor } from './register-doctor.js';
import { registerLinkDriver } from './register-link-driver.js';
import { isPatchelfInvocation, patchelfHelp } from './patchelf-arguments.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { errorLine } from './report.js';
import type { CliIo } from './cli-io.js';
import { DOCS_DIR, README_PATH, VERSION } from './package-files.js';

/** commander's codes for help and version output: nothing went wrong, or only help was asked for. */
const HELP_CODES = new Set(['commander.helpDisplayed', 'commander.help', 'commander.version']);

/** Errors after which the command's usage line says what it takes. */
const USAGE_CODES = new Set(['commander.missingArgument', 'commander.excessArguments']);

/**
 * commander's error as one `cuda-patchelf:` line, and the command's usage line where arguments are
 * missing or too many. commander words it as "error: WHAT", with "(Did you mean X?)" on a second line
 * when it has a guess; an unknown command also says what the tool takes.
 */
function usageErrorLines(error: CommanderError, program: Command, argv: readonly string[]): string[] {
  const [what = '', ...rest] = error.message.replace(/^error: /, '').split('\n');
  const guess = /^\(Did you mean (.+)\?\)$/.exec(rest.join(' ').trim())?.[1];
  if (error.code === 'commander.unknownCommand') {
    const hint =
      guess === undefined
        ? "cuda-patchelf takes a command (apply, check, plan, print, doctor, set-runpath, …) or patchelf's flags"
        : `did you mean ${guess}?`;
    return [`cuda-patchelf: ${what}: ${hint} (cuda-patchelf --help lists them)`];
  }
  const lines = [`cuda-patchelf: ${what}${guess === undefined ? '' : ` (did you mean ${guess}?)`}`];
  const command = program.commands.find((candidate) => candidate.name() === argv[0]);
  if (command !== undefined && USAGE_CODES.has(error.code)) lines.push(`Usage: cuda-patchelf ${command.name()} ${command.usage()}`);
  return lines;
}

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
      // commander's errors are printed where they are caught, below, where their code says which they are.
      outputError: () => undefined,
    })
    .addHelpText('after', `\n${EXIT_CODES_HELP}\n\n${patchelfHelp()}\n\nDocumentation: ${README_PATH} and ${DOCS_DIR}/`);
  // The order of --help: the tree commands first, what most runs need.
  registerTreeCommands(program, recordingIo);
  registerPrint(program, recordingIo);
  registerDoctor(program, recordingIo);
  registerLinkDriver(program, recordingIo);
  registerEditCommands(program, recordingIo);
  try {
    // A subcommand's own --output or --force-rpath must not send it to the patchelf-compatible mode.
    const subcommand = program.commands.some((command) => command.name() === argv[0]);
    // The patchelf-compatible mode is loaded only when it runs (the other commands start without it).
    if (!subcommand && isPatchelfInvocation(argv)) await (await import('./patchelf-compat.js')).runPatchelfCompat(argv, recordingIo);
    else await program.parseAsync(argv, { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end through here too, with exit code 0; `cuda-patchelf` alone prints the help on stderr.
      if (error.exitCode === 0) return EXIT.ok;
      if (!HELP_CODES.has(error.code)) for (const line of usageErrorLines(error, program, argv)) io.err(line);
      return EXIT.usage;
    }
    if (error instanceof CudaPatchelfError && error.kind === 'usage') {
      io.err(errorLine(error));
      return EXIT.usage;
    }
    throw error;
  }
  return exitCode;
}
