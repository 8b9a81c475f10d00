/** Exit codes of every cuda-patchelf command (documented in README.md). */
export const EXIT = {
  /** Everything asked for was done. */
  ok: 0,
  /** `check` found files that `apply` would change. */
  checkFoundWork: 1,
  /** The command line was wrong: nothing was read or written. */
  usage: 2,
  /** Some files failed (each reported on stderr); the others were done, the failed ones left untouched. */
  someFilesFailed: 3,
} as const;
