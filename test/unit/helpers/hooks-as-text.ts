// The hook engine's functions as the unit tests call them: runpaths, entries and directories written as
// ASCII text (test/helpers/byte-strings.ts), which the engine takes as the byte strings they are.

import type { ByteString } from '../../../src/elf/byte-string.js';
import * as engine from '../../../src/hook-engine/compose-hooks.js';
import type { FileFacts, Hook, TracedEntry } from '../../../src/hook-engine/hook.js';
import { type AsText, ascii } from '../../helpers/byte-strings.js';

/** An entry, a runpath or a directory written as ASCII text. */
export const b = (text: string): ByteString => ascii<ByteString>(text);

/** A hook written with its directories and patterns as ASCII text. */
export const hookOf = (written: AsText<Hook>): Hook => ascii<Hook>(written);

export function composeRunpath(
  hooks: readonly Hook[],
  file: FileFacts,
  current: string | null,
  semantics: engine.Semantics,
  names?: number,
): engine.ComposedRunpath | null {
  return engine.composeRunpath(hooks, file, current === null ? null : b(current), semantics, names);
}

export function composeAfterResolver(
  hooks: readonly Hook[],
  file: FileFacts,
  resolved: AsText<readonly TracedEntry[]>,
  semantics: engine.Semantics,
  names?: number,
): engine.ComposedRunpath {
  return engine.composeAfterResolver(hooks, file, ascii<readonly TracedEntry[]>(resolved), semantics, names);
}

export function isOneHookRun(hooks: readonly Hook[], file: FileFacts, current: string, names?: number): boolean {
  return engine.isOneHookRun(hooks, file, b(current), names);
}
