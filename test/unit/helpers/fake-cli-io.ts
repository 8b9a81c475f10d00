// The command line run in-process (src/cli/program.ts) through a CliIo that records what it is given:
// stdout and stderr lines, raw stderr writes (the progress line), with the CPU count and the terminal
// the test says, never the machine's.

import type { CliIo } from '../../../src/cli/cli-io.js';
import { runCli } from '../../../src/cli/program.js';

export interface CliRun {
  readonly code: number;
  readonly out: string[];
  readonly err: string[];
  /** errRaw's writes, in order. */
  readonly raw: string[];
}

export interface FakeCliOptions {
  readonly cpuCount?: number;
  readonly stderrIsTty?: boolean;
  /** How the command hears Ctrl-C; none by default, as a command run in-process has no signal to catch. */
  readonly catchInterrupt?: CliIo['catchInterrupt'];
  /** Called with each stdout line as it is written. */
  readonly onOut?: (line: string) => void;
}

export async function runInProcess(argv: readonly string[], options: FakeCliOptions = {}): Promise<CliRun> {
  const out: string[] = [];
  const err: string[] = [];
  const raw: string[] = [];
  const io: CliIo = {
    out: (line) => {
      out.push(line);
      options.onOut?.(line);
    },
    err: (line) => err.push(line),
    errRaw: (text) => raw.push(text),
    // runCli returns the code the command set.
    setExitCode: () => undefined,
    stderrIsTty: options.stderrIsTty ?? false,
    cpuCount: options.cpuCount ?? 1,
    host: { cwd: '/', arch: 'x64' },
    ...(options.catchInterrupt === undefined ? {} : { catchInterrupt: options.catchInterrupt }),
  };
  const code = await runCli(argv, io);
  return { code, out, err, raw };
}

/** stdout as the one JSON document a --json run writes. */
export function jsonOf(run: CliRun): unknown {
  return JSON.parse(run.out.join('\n'));
}
