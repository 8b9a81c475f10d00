// The CLI's only contact with the process: output streams and the exit code. Commands take it as an
// argument so that they can be run in-process by tests.

export interface CliIo {
  out(line: string): void;
  err(line: string): void;
  /** Writes to stderr without a newline (progress redraws). */
  errRaw(text: string): void;
  setExitCode(code: number): void;
  readonly stderrIsTty: boolean;
  readonly cpuCount: number;
}
