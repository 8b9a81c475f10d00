// The CLI's only contact with the process: output streams, the exit code and the machine it runs on.
// Commands take it as an argument so that they can be run in-process by tests.

export interface CliIo {
  out(line: string): void;
  err(line: string): void;
  /** Writes to stderr without a newline (progress redraws). */
  errRaw(text: string): void;
  setExitCode(code: number): void;
  readonly stderrIsTty: boolean;
  readonly cpuCount: number;
  /**
   * The machine the command runs on: the working directory, and the CPU architecture in Node's names
   * (x64, arm64). doctor and --auto-patchelf's proof need it (they emulate this machine's loader); a
   * command run in-process by a test that needs neither may leave it out.
   */
  readonly host?: { readonly cwd: string; readonly arch: string };
  /**
   * Calls `onInterrupt` at the first Ctrl-C (SIGINT) instead of ending the process, until the function
   * it returns is called; a second Ctrl-C ends the process at once. Absent where there is no process
   * signal to catch (a command run in-process by a test).
   */
  catchInterrupt?(onInterrupt: () => void): () => void;
}
