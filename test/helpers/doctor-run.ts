// Runs `cuda-patchelf doctor --json` as a user would (the built CLI) and hands back the report.

import type { FileReport } from '../../src/doctor/doctor-report.js';
import type { NamedFile } from '../../src/doctor/named-file.js';
import { runCli, type CliResult } from './run-cli.js';

export interface DoctorJson {
  readonly version: number;
  readonly settings: {
    readonly root: string | null;
    readonly ldLibraryPath: string | null;
    readonly driver: { version: string; source: string } | null;
  };
  readonly files: readonly FileReport[];
  /** The files named on the command line that are not dynamic ELF files. */
  readonly notDynamic: readonly NamedFile[];
  readonly errors: readonly { readonly file: string; readonly error: { kind: string; message: string } }[];
  readonly summary: readonly {
    readonly path: string;
    readonly files: number;
    readonly skipped: number;
    readonly errors: number;
    readonly warnings: number;
    readonly problems: number;
    readonly unreadable: number;
  }[];
}

export interface DoctorResult {
  readonly cli: CliResult;
  readonly json: DoctorJson;
}

/** `doctor --json ARGS…`; throws with everything it said when the output is not the JSON report. */
export async function doctorJson(args: readonly string[], options: { cwd?: string; timeoutMs?: number } = {}): Promise<DoctorResult> {
  const cli = await runCli(['doctor', '--json', ...args], {
    timeoutMs: options.timeoutMs ?? 120_000,
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
  });
  try {
    return { cli, json: JSON.parse(cli.stdout) as DoctorJson };
  } catch {
    throw new Error(`doctor ${args.join(' ')} exited ${String(cli.code)} without a JSON report:\n${cli.stderr}${cli.stdout}`);
  }
}

/** The objects a report says the loader opens, in load order, without ld.so itself. */
export function reportedLoads(file: FileReport): { name: string; path: string }[] {
  return file.loads.filter((load) => load.rule !== 'interpreter').map((load) => ({ name: load.name, path: load.path }));
}
