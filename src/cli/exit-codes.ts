/** Exit codes of every cuda-patchelf command (documented in README.md). */
export const EXIT = {
  /** Everything asked for was done. */
  ok: 0,
  /** `check` found files that `apply` would change. */
  checkFoundWork: 1,
  /** The command line was wrong: nothing was read or written. */
  usage: 2,
  /**
   * Some files failed (each reported on stderr); the others were done, the failed ones left untouched.
   * Also: --auto-patchelf found a library nowhere (one line per file and library; the files patched with the rest).
   */
  someFilesFailed: 3,
  /** apply was interrupted (Ctrl-C): the files done are counted, the others left untouched (128 + SIGINT, as a shell reports it). */
  interrupted: 130,
} as const;

/** The exit codes as the top-level --help lists them (README.md says the same). */
export const EXIT_CODES_HELP = [
  'Exit codes:',
  `  ${EXIT.ok}    everything asked for was done`,
  `  ${EXIT.checkFoundWork}    check: files that apply would change`,
  `  ${EXIT.usage}    a usage error: nothing was read or written`,
  `  ${EXIT.someFilesFailed}    some files failed, or --auto-patchelf found libraries nowhere, one line each on stderr; ` +
    'the others were done',
  `  ${EXIT.interrupted}  apply was interrupted (Ctrl-C): the files done are counted, the others left untouched`,
  '  doctor: 0 all well, 1 a problem found, 2 a usage error, 3 files could not be read',
  '  link-driver: 0 DEST links the driver (made, or already so), 1 no NVIDIA driver found, 2 a usage error, ' +
    '3 DEST could not be made (left as it was)',
  "  patchelf-compatible mode: 0, or 1 on any failure, as patchelf's",
].join('\n');
