// Outcomes cross the worker boundary by structured clone, which keeps an Error's message but not its
// class or fields: a failed outcome's error is sent as data and rebuilt on the other side.

import { CudaPatchelfError, type ErrorKind } from '../errors/cuda-patchelf-error.js';
import type { FileOutcome } from './file-outcome.js';

interface ErrorData {
  readonly kind: ErrorKind;
  readonly message: string;
  readonly file?: string;
  readonly offset?: number;
}

export type TransferredOutcome =
  | Exclude<FileOutcome, { status: 'failed' }>
  | { readonly path: string; readonly status: 'failed'; readonly error: ErrorData };

/** A failed outcome's error as data; an internal error keeps its cause's stack, which the clone would drop. */
export function serializeOutcome(outcome: FileOutcome): TransferredOutcome {
  if (outcome.status !== 'failed') return outcome;
  const { error } = outcome;
  const cause = error.cause instanceof Error ? error.cause : null;
  return {
    path: outcome.path,
    status: 'failed',
    error: {
      kind: error.kind,
      message: error.kind === 'internal' && cause !== null ? (cause.stack ?? error.message) : error.message,
      ...(error.file === undefined ? {} : { file: error.file }),
      ...(error.offset === undefined ? {} : { offset: error.offset }),
    },
  };
}

export function deserializeOutcome(outcome: TransferredOutcome): FileOutcome {
  if (outcome.status !== 'failed') return outcome;
  const { kind, message, file, offset } = outcome.error;
  return {
    path: outcome.path,
    status: 'failed',
    error: new CudaPatchelfError(kind, message, { ...(file === undefined ? {} : { file }), ...(offset === undefined ? {} : { offset }) }),
  };
}
