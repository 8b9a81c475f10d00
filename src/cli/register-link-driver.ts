// The link-driver command's options; its work (src/cli/link-driver-command.ts, and src/driver-link/
// under it) is loaded only when it runs, so that the other commands start without compiling it.

import type { Command } from 'commander';
import type { CliIo } from './cli-io.js';
import type { LinkDriverOptions } from './link-driver-command.js';
import { docPath } from './package-files.js';

/** A repeatable option's values, in the order given. */
const repeated = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];

export function registerLinkDriver(program: Command, io: CliIo): void {
  program
    .command('link-driver')
    .description(
      "make the driver link (NixOS' /run/opengl-driver) on the machine that runs the programs: links to the host " +
        "driver's libraries, with the newest cuda_compat NVIDIA's rule allows on its kernel driver in front",
    )
    .argument('<dest>', 'the driver link to make, a symbolic link switched atomically: /run/opengl-driver')
    .option(
      '--from <dir>',
      "the driver's libraries are in DIR (repeatable; default: through the loader's cache, /etc/ld.so.cache)",
      repeated,
    )
    .option('--cuda-compat <dir>', 'a cuda_compat package (DIR/compat holds its libcuda.so.X.Y.Z) to weigh (repeatable)', repeated)
    .option('--base <dir>', "keep DIR's entries, and those of DIR/lib, in the link under the driver's libraries (NixOS' graphics drivers)")
    .option(
      '--driver-version <version>',
      "decide for this kernel driver (default: the loaded module's, else the driver libraries' release)",
    )
    .option('--dry-run', 'say what would be linked; write nothing')
    .option('--json', `one JSON document on stdout (see ${docPath('driver-link.md')})`)
    .action(async (dest: string, options: LinkDriverOptions) => {
      const { runLinkDriver } = await import('./link-driver-command.js');
      await runLinkDriver(dest, options, io);
    });
}
