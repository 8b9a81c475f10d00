// The operations a fuzzed input goes through, each by the tool's own read → plan → write path on a
// real file (editElfFile for the edit commands, processFile for apply's hooks), and what must read
// back afterwards: the dynamic array and the interpreter path the edit asked for, every other entry as
// it was, and nothing more to do when the same edit is asked again.

import { readFile, stat } from 'node:fs/promises';
import type { FileOutcome } from '../../src/batch/file-outcome.js';
import { processFile } from '../../src/batch/process-file.js';
import { FileByteSource } from '../../src/elf/byte-source.js';
import type { ByteString } from '../../src/elf/byte-string.js';
import { DT, PT } from '../../src/elf/constants.js';
import { currentEntries, type CurrentEntry } from '../../src/plan/edit-facts.js';
import { readEditFacts } from '../../src/edit/read-edit-facts.js';
import { RELOCATABLE_SECTION_TAGS, STRING_TAGS } from '../../src/elf/tag-groups.js';
import { readElfImage } from '../../src/elf/elf-image.js';
import { CudaPatchelfError } from '../../src/errors/cuda-patchelf-error.js';
import { editElfFile, type EditOperations } from '../../src/edit/edit-file.js';
import { cudaCompatHook, driverHook, removeStubsHook } from '../../src/hook-engine/builtin-hooks.js';
import type { Semantics } from '../../src/hook-engine/compose-hooks.js';
import { orderHooks } from '../../src/hook-engine/order-hooks.js';
import { BUILTIN_HOOK_NAMES } from '../../src/hook-engine/builtin-hooks.js';
import type { DynamicEditor } from '../../src/plan/dynamic-editor.js';
import { isStringEntry, type WantedEntry } from '../../src/plan/wanted.js';
import type { Plan } from '../../src/plan/plan.js';
import { COMPAT_DIR } from '../campaign/kill-campaign.js';
import { ascii, latin1 } from '../helpers/byte-strings.js';
import type { Rng } from '../helpers/fuzz-mutations.js';
import { planFile } from '../helpers/fuzz-plan-file.js';
import { rawLayout, type RawProgramHeader } from '../helpers/malformed.js';

/** What happened to one input. `problems` empty: every property held. */
export interface OperationResult {
  readonly outcome: 'written' | 'noop' | 'refused' | 'skipped';
  /** The error kind of a refusal. */
  readonly refusal?: string;
  /** The tier a written file took. */
  readonly tier?: string;
  readonly problems: string[];
}

export interface Operation {
  /** The operation in words, for the replay log. */
  readonly name: string;
  run(path: string, input: Uint8Array): Promise<OperationResult>;
}

/** Entries whose value may change when tables move: the string table and what only a tag points at. */
const MOVABLE_VALUE_TAGS: ReadonlySet<number> = new Set([DT.DT_STRTAB, DT.DT_STRSZ, ...RELOCATABLE_SECTION_TAGS]);

const PATH_CHARS = 'abcdefghijklmnopqrstuvwxyz0123456789/._-$';

/** A byte string (one char per byte) of `length` path-like bytes, some of them above 0x7f. */
function pathBytes(r: Rng, length: number): string {
  let value = '';
  for (let i = 0; i < length; i++) value += r.below(16) === 0 ? String.fromCharCode(0x80 + r.below(0x80)) : r.pick([...PATH_CHARS]);
  return value;
}

/** A byte string for the replay log: bytes outside printable ASCII as \xNN, so none is invisible. */
function printable(value: string, limit = 80): string {
  const shown = [...value.slice(0, limit)]
    .map((c) => (c < ' ' || c > '~' ? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}` : c))
    .join('');
  return value.length > limit ? `${shown}…(${value.length} bytes)` : shown;
}

function runpathValue(r: Rng): ByteString {
  return latin1(
    r.pick([
      () => '',
      () => '$ORIGIN',
      () => '/run/opengl-driver/lib',
      () => `/nix/store/${pathBytes(r, 32)}-cuda_compat/compat:/run/opengl-driver/lib:$ORIGIN/../lib`,
      () => pathBytes(r, 1 + r.below(16)),
      () => pathBytes(r, 200 + r.below(4000)),
      () => Array.from({ length: 1 + r.below(8) }, () => `/${pathBytes(r, 1 + r.below(40))}`).join(':'),
    ])(),
  );
}

function libraryName(r: Rng): ByteString {
  return latin1(`lib${pathBytes(r, 1 + r.below(r.below(4) === 0 ? 300 : 12)).replaceAll('/', '_')}.so.${r.below(10)}`);
}

/** The dynamic array as an editor (the operation's intent) or the written file (the result) has it. */
function describeEntry(entry: WantedEntry | CurrentEntry): string {
  if ('text' in entry && entry.text !== null) return `0x${entry.d_tag.toString(16)}="${printable(entry.text)}"`;
  return `0x${entry.d_tag.toString(16)}=${'d_val' in entry ? entry.d_val : '?'}`;
}

/** Differences between the dynamic array asked for and the one that reads back from the written file. */
function arrayDifferences(wanted: readonly WantedEntry[], got: readonly CurrentEntry[]): string[] {
  const problems: string[] = [];
  if (wanted.length !== got.length) problems.push(`dynamic array has ${got.length} entries, the edit asked for ${wanted.length}`);
  for (let i = 0; i < Math.min(wanted.length, got.length); i++) {
    const w = wanted[i] as WantedEntry;
    const g = got[i] as CurrentEntry;
    const same =
      w.d_tag === g.d_tag &&
      (isStringEntry(w) ? (STRING_TAGS.has(w.d_tag) ? g.text === w.text : true) : MOVABLE_VALUE_TAGS.has(w.d_tag) || g.d_val === w.d_val);
    if (!same) problems.push(`entry ${i}: asked for ${describeEntry(w)}, reads back ${describeEntry(g)}`);
  }
  return problems;
}

/** Reads a written file back with the tool's own reader: header, dynamic array, its strings. */
async function readBackEntries(
  path: string,
): Promise<{ entries: CurrentEntry[]; machine: number; type: number; interpreter: string | null }> {
  const source = FileByteSource.open(path);
  try {
    const image = await readElfImage(source);
    const facts = await readEditFacts(image);
    return { entries: currentEntries(facts), machine: image.header.e_machine, type: image.header.e_type, interpreter: image.interpreter };
  } finally {
    source.close();
  }
}

/**
 * The plan's writes laid over the input (behind `shift` zero bytes for a rewrite): what the file must
 * hold afterwards, byte for byte.
 */
function expectedBytes(input: Uint8Array, plan: Plan): Uint8Array {
  const shift = plan.shift ?? 0;
  const out = new Uint8Array(
    Math.max(plan.newSize, shift + input.length, ...plan.writes.map((write) => write.offset + write.bytes.length)),
  );
  out.set(input, shift);
  for (const write of plan.writes) out.set(write.bytes, write.offset);
  return out.subarray(0, plan.newSize);
}

/**
 * The file's bytes now, or its size when it grew past any legitimate edit of the input (tables of the
 * input copied once, plus alignment): such a file is not read whole.
 */
async function readResult(path: string, input: Uint8Array): Promise<Uint8Array | { tooLarge: number }> {
  const { size } = await stat(path);
  if (size > largestEdit(input)) return { tooLarge: size };
  return new Uint8Array(await readFile(path));
}

/**
 * An edit copies tables of the input, and an executable's new segment may need padding up to its
 * alignment (2 MiB on x86_64 CUDA files): growth beyond this is no edit of a runpath.
 */
const MAX_GROWTH = 4 * 2 ** 20;

/** The largest hole an executable's moved program header table may leave in the file (docs/design.md). */
const MAX_IDENTITY_HOLE = 64 * 2 ** 20;

/** The largest page of the machines the rewriter knows (aarch64 with 64 KiB pages). */
const LARGEST_PAGE = 64 * 2 ** 10;

/**
 * The largest file an edit of `input` may leave: its tables copied once and alignment, and, when its
 * memory image reaches past its size, the hole that puts a moved program header table where the kernel
 * looks for it (file offset = address - the first PT_LOAD's address, past every segment; up to 64 MiB,
 * as docs/design.md says).
 */
function largestEdit(input: Uint8Array): number {
  return 2 * input.length + MAX_GROWTH + identityHole(input);
}

/**
 * The hole a moved program header table may leave in an input whose first PT_LOAD starts at offset 0
 * (the kernel finds the table by its offset there): the new segment starts past the memory image and
 * then the largest dynamic symbol's size above it (docs/design.md), and a damaged file claims any
 * size; the design bounds the hole at 64 MiB and refuses a larger one. 0 for an input whose first
 * PT_LOAD starts elsewhere, or that the corpus's own decoder cannot read.
 */
function identityHole(input: Uint8Array): number {
  let loads: RawProgramHeader[];
  try {
    loads = rawLayout(input).programHeaders.filter((ph) => ph.type === PT.PT_LOAD);
  } catch {
    return 0;
  }
  const first = loads.reduce<RawProgramHeader | undefined>((low, ph) => (low === undefined || ph.vaddr < low.vaddr ? ph : low), undefined);
  return first === undefined || first.offset !== 0 ? 0 : MAX_IDENTITY_HOLE + LARGEST_PAGE;
}

/** Problems with a file the tool was to leave alone. */
async function untouchedProblems(path: string, input: Uint8Array, what: string): Promise<string[]> {
  const now = await readResult(path, input);
  if ('tooLarge' in now) return [`${what} grew to ${now.tooLarge} bytes`];
  return sameBytes(now, input) ? [] : [`${what} was changed`];
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(Buffer.from(b.buffer, b.byteOffset, b.length));
}

/** What a refusal must look like: the tool's own error, a kind a bad file may get, a readable message. */
function refusalProblems(error: unknown): string[] {
  if (!(error instanceof CudaPatchelfError)) {
    return [`not a CudaPatchelfError: ${error instanceof Error ? `${error.name}: ${error.message}\n${error.stack ?? ''}` : String(error)}`];
  }
  const describe = error.describe();
  const problems: string[] = [];
  if (error.kind !== 'format' && error.kind !== 'unsupported') problems.push(`kind ${error.kind} for a bad input: ${describe}`);
  if (/NaN|undefined|Infinity|\[object/.test(describe)) problems.push(`unreadable message: ${describe}`);
  return problems;
}

/** An edit command's operation through editElfFile, checked against the editor's own intent. */
export function editOperation(name: string, apply: (editor: DynamicEditor) => void): Operation {
  return {
    name,
    async run(path, input) {
      let wanted: readonly WantedEntry[] = [];
      let before: { machine: number; type: number; interpreter: string | null } | null = null;
      const operations: EditOperations = (editor, image) => {
        apply(editor);
        wanted = editor.wanted().entries;
        // The interpreter the edit leaves: the file's own, or the one set-interpreter asked for.
        before = { machine: image.header.e_machine, type: image.header.e_type, interpreter: editor.wanted().interpreter };
      };
      let plan: Plan;
      try {
        ({ plan } = await editElfFile(path, operations));
      } catch (error) {
        const problems = [...refusalProblems(error), ...(await untouchedProblems(path, input, 'a refused file'))];
        return { outcome: 'refused', refusal: (error as { kind?: string }).kind ?? 'crash', problems };
      }
      const problems: string[] = [];
      const tier = plan.tier;
      if (plan.newSize > largestEdit(input))
        return { outcome: 'written', tier, problems: [`the plan grows the file from ${input.length} to ${plan.newSize} bytes`] };
      const written = await readResult(path, input);
      if ('tooLarge' in written)
        return { outcome: 'written', tier, problems: [`the written file grew from ${input.length} to ${written.tooLarge} bytes`] };
      if (!sameBytes(written, expectedBytes(input, plan)))
        problems.push(`the file does not hold the input with the plan's ${plan.writes.length} writes laid over it`);
      try {
        const back = await readBackEntries(path);
        problems.push(...arrayDifferences(wanted, back.entries));
        const was = before as { machine: number; type: number; interpreter: string | null } | null;
        if (was !== null && (was.machine !== back.machine || was.type !== back.type || was.interpreter !== back.interpreter)) {
          problems.push(`e_machine or e_type changed, or the interpreter reads back as "${printable(back.interpreter ?? '(none)')}"`);
        }
      } catch (error) {
        problems.push(`the written file does not read back: ${error instanceof Error ? error.message : String(error)}`);
      }
      try {
        const again = (await planFile(path, (editor) => apply(editor))).tier;
        if (again !== 'noop') problems.push(`the same edit again is not a noop (tier ${again})`);
      } catch (error) {
        problems.push(`the same edit again fails: ${error instanceof Error ? error.message : String(error)}`);
      }
      return plan.tier === 'noop' ? { outcome: 'noop', problems } : { outcome: 'written', tier, problems };
    },
  };
}

/** apply's path: processFile with the built-in hooks, as the batch runs it. */
export function hooksOperation(semantics: Semantics, removeStubs: boolean): Operation {
  const hooks = orderHooks(
    [
      driverHook(),
      cudaCompatHook(ascii<ByteString>(COMPAT_DIR)),
      ...(removeStubs ? [removeStubsHook({ patterns: [ascii<ByteString>('*/lib/stubs*')] })] : []),
    ],
    BUILTIN_HOOK_NAMES,
  );
  const options = { hooks, semantics, dryRun: false };
  return {
    name: `apply hooks (${semantics}${removeStubs ? ', remove-stubs' : ''})`,
    async run(path, input) {
      const item = { kind: 'file', path, relativePath: 'lib/input.so' } as const;
      let outcome: FileOutcome;
      try {
        outcome = await processFile(item, options);
      } catch (error) {
        return {
          outcome: 'refused',
          refusal: 'crash',
          problems: [`processFile threw: ${error instanceof Error ? `${error.message}\n${error.stack ?? ''}` : String(error)}`],
        };
      }
      const problems: string[] = [];
      switch (outcome.status) {
        case 'failed': {
          problems.push(...refusalProblems(outcome.error), ...(await untouchedProblems(path, input, 'a failed file')));
          return { outcome: 'refused', refusal: (outcome.error as { kind?: string }).kind ?? 'crash', problems };
        }
        case 'skipped':
        case 'unchanged':
          problems.push(...(await untouchedProblems(path, input, `a file ${outcome.status}`)));
          return { outcome: outcome.status === 'skipped' ? 'skipped' : 'noop', problems };
        case 'patched': {
          const tier = outcome.tier;
          const written = await readResult(path, input);
          if ('tooLarge' in written)
            return { outcome: 'written', tier, problems: [`the written file grew from ${input.length} to ${written.tooLarge} bytes`] };
          try {
            const back = await readBackEntries(path);
            const runpath = back.entries.find((e) => e.d_tag === DT.DT_RUNPATH) ?? back.entries.find((e) => e.d_tag === DT.DT_RPATH);
            if (runpath?.text !== outcome.newRunpath)
              problems.push(`runpath reads back as "${runpath?.text ?? '(none)'}", apply reported "${outcome.newRunpath}"`);
            if (semantics === 'default') {
              const again = await processFile(item, { ...options, dryRun: true });
              if (again.status !== 'unchanged') problems.push(`apply again is not a noop: ${again.status}`);
            }
          } catch (error) {
            problems.push(`the written file does not read back: ${error instanceof Error ? error.message : String(error)}`);
          }
          return { outcome: 'written', tier, problems };
        }
        case 'would-refuse':
        case 'interrupted':
          // Only a dry run says what apply would refuse, and only an interrupted run leaves a file out: this run writes, uninterrupted.
          return { outcome: 'refused', refusal: 'crash', problems: [`a run that writes, uninterrupted, returned ${outcome.status}`] };
      }
    },
  };
}

/**
 * The DT_NEEDED name at a position of the input, chosen on the first call and the same name after:
 * asking for the same edit again must name the same library, not the one that moved into its place.
 */
function neededPicker(which: number): { which: number; name(editor: DynamicEditor): ByteString | undefined } {
  let chosen: { name: ByteString | undefined } | null = null;
  return {
    which,
    name(editor) {
      chosen ??= { name: editor.needed()[which] };
      return chosen.name;
    },
  };
}

/** A path for set-interpreter: shorter than a loader's (in place when it fits), a little longer, or much longer (appended). */
function interpreterPath(r: Rng): ByteString {
  return latin1(`/${pathBytes(r, r.pick([1 + r.below(26), 27 + r.below(100), 200 + r.below(3000)]))}`);
}

/**
 * One operation for an input, drawn from the same generator as its mutation. `interpreter`, a stream
 * of its own (so that every seed and iteration draws the operations it drew before), adds
 * set-interpreter to one input in four: alone in place of apply's hooks, else in the same edit (one
 * plan: the path and a grown string table share the appended region). Null draws none (the replays
 * of inputs found before it existed).
 */
export function drawOperation(r: Rng, interpreter: Rng | null): Operation {
  const path = interpreter !== null && interpreter.below(4) === 0 ? interpreterPath(interpreter) : null;
  const setInterpreter = (e: DynamicEditor): void => {
    if (path !== null) e.setInterpreter(path);
  };
  const named = (name: string): string => (path === null ? name : `set-interpreter "${printable(path)}" and ${name}`);
  const edit = (name: string, apply: (editor: DynamicEditor) => void): Operation =>
    editOperation(named(name), (e) => {
      setInterpreter(e);
      apply(e);
    });
  switch (r.below(8)) {
    case 0: {
      const removeStubs = r.below(2) === 0;
      return path === null ? hooksOperation('default', removeStubs) : edit('nothing else', () => undefined);
    }
    case 1:
      return path === null ? hooksOperation('nixpkgs-compat', false) : edit('nothing else', () => undefined);
    case 2: {
      const value = runpathValue(r);
      const policy = r.pick(['keep', 'runpath', 'rpath'] as const);
      return edit(`set-runpath (${policy}) "${printable(value)}"`, (e) => e.setRunpath(value, policy));
    }
    case 3:
      return edit('remove-runpath --all', (e) => e.setRunpath(null));
    case 4: {
      const name = libraryName(r);
      return edit(`add-needed "${printable(name)}"`, (e) => e.addNeeded(name));
    }
    case 5: {
      const pick = neededPicker(r.below(4));
      return edit(`remove-needed #${pick.which}`, (e) => {
        const name = pick.name(e);
        if (name !== undefined) e.removeNeeded(name);
      });
    }
    case 6: {
      const pick = neededPicker(r.below(4));
      const to = libraryName(r);
      return edit(`replace-needed #${pick.which} "${printable(to)}"`, (e) => {
        const name = pick.name(e);
        if (name !== undefined && name !== to) e.replaceNeeded(name, to);
      });
    }
    default: {
      const dirs = Array.from({ length: 1 + r.below(3) }, () => `/${pathBytes(r, 1 + r.below(60))}`);
      return edit(`add-runpath "${printable(dirs.join(':'), 400)}"`, (e) => {
        const current = e.runpath();
        const kept = current === null || current === '' ? [] : current.split(':').filter((dir) => !dirs.includes(dir));
        e.setRunpath(latin1([...dirs, ...kept].join(':')));
      });
    }
  }
}
