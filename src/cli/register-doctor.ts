// The doctor command's options; its work (src/cli/doctor-command.ts, and the loader emulation under
// it) is loaded only when doctor runs, so that the other commands start without compiling it.

import type { Command } from 'commander';
import type { CliIo } from './cli-io.js';
import type { DoctorOptions } from './doctor-command.js';
import { docPath } from './package-files.js';

export function registerDoctor(program: Command, io: CliIo): void {
  program
    .command('doctor')
    .description('which libcuda.so.1 each program really loads, and whether CUDA will start: the glibc loader emulated per file')
    .argument(
      '<paths...>',
      'programs, libraries or trees (./result) to diagnose; a Nix shell wrapper (makeWrapper) is ' +
        'followed to the program it runs, with the LD_LIBRARY_PATH it exports',
    )
    .option(
      '--root <dir>',
      'a system root (an aarch64 Jetson image on an x86_64 machine): runpaths, the cache and the ' +
        'default directories are looked up under it',
    )
    .option('--ld-library-path <list>', 'emulate this LD_LIBRARY_PATH (default: none; doctor never reads its own)')
    .option(
      '--driver-version <version>',
      "the kernel driver version to check against (default: this machine's, from /sys/module/nvidia/version, else the name of " +
        'the libcuda ld.so.cache lists)',
    )
    .option('--driver-lib <file>', 'take the kernel driver version from this libcuda (its name, link target or contents)')
    .option(
      '--problems',
      'only the files with findings, each with the lines its findings rest on: what is not found and ' +
        'where the loader looked, and the loads that lead there',
    )
    .option('--json', `one JSON document on stdout (see ${docPath('doctor.md')})`)
    .action(async (paths: string[], options: DoctorOptions) => {
      const { doctor } = await import('./doctor-command.js');
      await doctor(paths, options, io);
    });
}
