// The line a single-file edit prints: what changed in the dynamic section and the interpreter, in words, and how it reached
// the file. The planner's tier names stay out of it: "append" printed after a prepend reads as the wrong
// operation. The words come from the entries before and after the operations, so they say what was
// done, whichever command asked for it (a set-runpath that only converts DT_RPATH says so).

import { type ByteString, byteStringToText, DT_NAMES, EMPTY_BYTE_STRING, joinRunpath, nameOf, splitRunpath } from '../elf/elf.js';
import type { EditOperations, EditResult } from '../edit/edit-file.js';
import type { DynamicEditor } from '../plan/dynamic-editor.js';
import type { Tier } from '../plan/plan.js';

interface DynamicState {
  readonly runpath: ByteString | null;
  readonly runpathTag: number | null;
  readonly needed: readonly ByteString[];
  readonly interpreter: ByteString | null;
}

function stateOf(editor: DynamicEditor): DynamicState {
  return { runpath: editor.runpath(), runpathTag: editor.runpathTag(), needed: editor.needed(), interpreter: editor.interpreter() };
}

/** The operations, answering what they changed, in words (none when they changed nothing). */
export function watchChanges(operations: EditOperations): EditOperations<string[]> {
  return async (editor, image) => {
    const before = stateOf(editor);
    await operations(editor, image);
    return describeChanges(before, stateOf(editor));
  };
}

const quoted = (value: ByteString): string => `'${byteStringToText(value)}'`;
const sameList = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && a.every((item, i) => item === b[i]);

/** The entries of `from` that are not matched, in order, by `kept` (null when `kept` is not a subsequence). */
function removedFrom(from: readonly ByteString[], kept: readonly ByteString[]): ByteString[] | null {
  const removed: ByteString[] = [];
  let next = 0;
  for (const item of from) {
    if (next < kept.length && kept[next] === item) next++;
    else removed.push(item);
  }
  return next === kept.length ? removed : null;
}

function runpathChange(before: DynamicState, after: DynamicState): string | null {
  if (before.runpath === after.runpath) return null;
  if (after.runpath === null) return 'runpath removed';
  const old = splitRunpath(before.runpath);
  const now = splitRunpath(after.runpath);
  const grown = now.length - old.length;
  if (old.length > 0 && grown > 0 && sameList(now.slice(grown), old))
    return `${quoted(joinRunpath(now.slice(0, grown)))} prepended to the runpath`;
  if (old.length > 0 && grown > 0 && sameList(now.slice(0, old.length), old))
    return `${quoted(joinRunpath(now.slice(old.length)))} appended to the runpath`;
  const removed = grown < 0 ? removedFrom(old, now) : null;
  if (removed !== null) return `${quoted(joinRunpath(removed))} removed from the runpath`;
  return `runpath set to ${quoted(after.runpath)}`;
}

function tagChange(before: DynamicState, after: DynamicState): string | null {
  if (before.runpathTag === null || after.runpathTag === null || before.runpathTag === after.runpathTag) return null;
  return `${nameOf(DT_NAMES, before.runpathTag)} turned into ${nameOf(DT_NAMES, after.runpathTag)}`;
}

function neededChanges(before: DynamicState, after: DynamicState): string[] {
  const added = after.needed.filter((name) => !before.needed.includes(name));
  const removed = before.needed.filter((name) => !after.needed.includes(name));
  // Names swapped at their own positions are renames (replace-needed), not an add and a remove, also
  // when the new name is needed already: each name that changed at its position is gone from the list.
  const renamed =
    removed.length > 0 &&
    before.needed.length === after.needed.length &&
    before.needed.every((name, i) => name === after.needed[i] || removed.includes(name));
  if (renamed)
    return before.needed.flatMap((name, i) =>
      name === after.needed[i]
        ? []
        : [`${quoted(name)} replaced by ${quoted(after.needed[i] ?? EMPTY_BYTE_STRING)} in the needed libraries`],
    );
  const changes: string[] = [];
  if (added.length > 0) changes.push(`${added.map(quoted).join(', ')} added to the needed libraries`);
  if (removed.length > 0) changes.push(`${removed.map(quoted).join(', ')} removed from the needed libraries`);
  if (changes.length === 0 && !sameList(before.needed, after.needed)) changes.push('needed libraries reordered');
  return changes;
}

function interpreterChange(before: DynamicState, after: DynamicState): string | null {
  return after.interpreter === null || before.interpreter === after.interpreter ? null : `interpreter set to ${quoted(after.interpreter)}`;
}

function describeChanges(before: DynamicState, after: DynamicState): string[] {
  return [interpreterChange(before, after), tagChange(before, after), runpathChange(before, after), ...neededChanges(before, after)].filter(
    (change): change is string => change !== null,
  );
}

/** How each tier reaches the file, done and planned. */
const WRITTEN: Record<Exclude<Tier, 'noop'>, { readonly done: string; readonly planned: string }> = {
  'in-place': { done: 'edited in place', planned: 'would be edited in place' },
  append: { done: 'tables copied to the end of the file', planned: 'tables would be copied to the end of the file' },
  rewrite: { done: 'file rewritten whole', planned: 'the file would be rewritten whole' },
};

/** `FILE: WHAT CHANGED (HOW IT WAS WRITTEN)`, or that the file was already as asked; the changes are watchChanges' answer. */
export function editLine(result: EditResult<readonly string[]>, dryRun: boolean): string {
  if (result.tier === 'noop') return `${result.file}: already as asked, nothing written`;
  const changes = result.answer;
  const what = changes.length > 0 ? changes.join('; ') : 'dynamic section changed';
  const how = dryRun
    ? `dry run: ${WRITTEN[result.tier].planned}`
    : `${WRITTEN[result.tier].done}, ${result.bytesWritten} ${result.bytesWritten === 1 ? 'byte' : 'bytes'} written`;
  return `${result.file}: ${what} (${how})`;
}
