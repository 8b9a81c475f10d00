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
  /**
   * Calls `onInterrupt` at the first Ctrl-C (SIGINT) instead of ending the process, until the function
   * it returns is called; a second Ctrl-C ends the process at once. Absent where there is no process
   * signal to catch (a command run in-process by a test).
   */
  catchInterrupt?(onInterrupt: () => void): () => void;
}
