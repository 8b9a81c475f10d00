/**
 * What went wrong, as a stable word a caller can branch on and a report can count.
 * - `format`: the file is not a valid ELF file, or a structure in it is out of bounds or inconsistent.
 * - `io`: the file could not be opened, read or written (missing, permission, not a regular file…).
 * - `unsupported`: a valid ELF file that this edit cannot be carried out on, whole.
 * - `usage`: the request itself is wrong (bad option, unknown hook, cycle…).
 * - `changed`: the file changed on disk between reading and writing.
 * - `stopped`: the worker thread patching the file died (killed, out of memory): the file was left alone.
 * - `internal`: an error cuda-patchelf did not expect (a bug); the original is the cause.
 */
export type ErrorKind = 'format' | 'io' | 'unsupported' | 'usage' | 'changed' | 'stopped' | 'internal';

/** The one error base class of cuda-patchelf: a kind, the file it concerns, and where in it. */
export class CudaPatchelfError extends Error {
  readonly kind: ErrorKind;
  readonly file: string | undefined;
  readonly offset: number | undefined;

  constructor(kind: ErrorKind, message: string, options: { file?: string; offset?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'CudaPatchelfError';
    this.kind = kind;
    this.file = options.file;
    this.offset = options.offset;
  }

  /** One line for a person, `FILE: MESSAGE (at offset 0x…)`: control characters escaped, so a name with a newline stays one line. */
  describe(): string {
    const where = this.offset === undefined ? '' : ` (at offset 0x${this.offset.toString(16)})`;
    const what = this.kind === 'internal' ? `internal error: ${this.message}` : this.message;
    return `${this.file === undefined ? '' : `${oneLine(this.file)}: `}${oneLine(what)}${where}`;
  }

  /** The same error attributed to a file, for errors raised below the layer that knows the path; the original is its cause. */
  withFile(file: string): CudaPatchelfError {
    if (this.file !== undefined) return this;
    return new CudaPatchelfError(this.kind, this.message, {
      file,
      cause: this,
      ...(this.offset === undefined ? {} : { offset: this.offset }),
    });
  }
}

/**
 * Any error as a CudaPatchelfError naming `file`: one of ours attributed to it, anything else (a bug)
 * an `internal` error whose cause is the original, so that its stack is not lost.
 */
export function asFileError(error: unknown, file: string): CudaPatchelfError {
  if (error instanceof CudaPatchelfError) return error.withFile(file);
  return new CudaPatchelfError('internal', error instanceof Error ? error.message : String(error), { file, cause: error });
}

/** Shorthand for the most common error: a structure of the file is malformed. */
export function malformedInput(message: string, offset?: number): CudaPatchelfError {
  return new CudaPatchelfError('format', message, offset === undefined ? {} : { offset });
}

/** Control characters as escapes (\n, \t, \x1b …): an error line stays one line whatever a name holds. */
export function oneLine(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this escapes.
  return text.replace(/[\x00-\x1f\x7f]/g, (c) =>
    c === '\n' ? '\\n' : c === '\t' ? '\\t' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
}
