// The name of the whole-file rewrite's temporary file, made by the writer (write/rewrite-file.ts) and
// recognised by the walk: both sides of the rule live here, below both.

/** The name the new file has, beside the old one named `name`, until it replaces it: `.NAME.cuda-patchelf-rewrite-PID`. */
export function rewriteTemporaryName(name: string, pid: number): string {
  return `.${name}.cuda-patchelf-rewrite-${pid}`;
}

/**
 * Whether a file name is such a temporary name: a run killed during a rewrite leaves one, and a run at
 * the same moment may be writing one. The walk leaves them alone.
 */
export function isRewriteTemporary(name: string): boolean {
  return /^\..+\.cuda-patchelf-rewrite-\d+$/.test(name);
}
