// One resolved file's runpath, settled before anything is written: the resolver's entries put in an
// order where nothing shadows what it chose (resolve/runpath-order.ts, default semantics; under
// --nixpkgs-compat the anchor's order stands), the other hooks composed after them as phase 2 will
// compose them, and the result proven with the loader model (runpath-proof.ts). A file whose runpath
// cannot be ordered, or whose proof fails, is refused with one line naming the library and the files:
// it is not written.

import { type ByteString, byteStringToText, EMPTY_BYTE_STRING, ET, joinBytePath, sliceByteString } from '../elf/elf.js';
import { composeAfterResolver, composeRunpath, RESOLVER_HOOK_NAME, type Semantics } from '../hook-engine/compose-hooks.js';
import type { FileFacts, Hook, TracedEntry } from '../hook-engine/hook.js';
import type { FileResolution } from '../resolve/resolve-file.js';
import { orderRunpath, type OrderConflict } from '../resolve/runpath-order.js';
import type { ResolverFacts } from './resolver-facts.js';
import type { ChosenLibrary, PlannedSearchList, ProofMismatch, RunpathProver } from './runpath-proof.js';

export interface SettleInputs {
  readonly path: string;
  readonly relativePath: string;
  readonly facts: ResolverFacts;
  readonly resolution: FileResolution;
  /** libc's directory (a byte string), whose libraries the interpreter finds after the runpath; null without one. */
  readonly libcDir: ByteString | null;
  readonly semantics: Semantics;
  readonly hooks: readonly Hook[];
}

export type SettledRunpath =
  /** `runpath`: the resolver's entries in their order, traced; null: it leaves the runpath as it is. */
  { readonly kind: 'settled'; readonly runpath: readonly TracedEntry[] | null } | { readonly kind: 'refused'; readonly message: string };

/** The file name of a dependency (an absolute name resolved through the index by it). */
const fileNameOf = (name: ByteString): ByteString => sliceByteString(name, name.lastIndexOf('/') + 1);

/** The dependencies the resolver chose a file for, and the file: through the index (its entry), or libc's directory. */
function chosenLibraries(inputs: SettleInputs, prover: RunpathProver): ChosenLibrary[] {
  const { resolution, facts, libcDir } = inputs;
  const chosen: ChosenLibrary[] = [];
  resolution.dependencies.forEach(({ found }, i) => {
    if (found === null) return;
    const by = i < facts.needed.length ? 'needed' : 'dlopen';
    const { rule } = found.by;
    if (found.by.rule === 'index') {
      const directory = found.by.directory;
      const entry = resolution.resolved.find((resolved) => resolved.directory === directory)?.entry ?? directory;
      const file = prover.libraryFile(joinBytePath(directory, fileNameOf(found.name)));
      if (file !== null) chosen.push({ name: found.name, entry, file, by });
    } else if ((rule === 'libc' || rule === 'kept-libc') && libcDir !== null) {
      const file = prover.libraryFile(joinBytePath(libcDir, found.name));
      if (file !== null) chosen.push({ name: found.name, entry: null, file, by });
    }
  });
  return chosen;
}

function conflictLine(conflict: OrderConflict, libcDir: ByteString | null): string {
  const name = byteStringToText(conflict.name);
  const other = byteStringToText(conflict.other);
  if (conflict.wanted === null)
    return `${name}: libc's directory ${byteStringToText(libcDir ?? EMPTY_BYTE_STRING)} provides it, but the runpath entry ${other} holds another ${name}, which the loader would take first`;
  const wanted = byteStringToText(conflict.wanted);
  return `cannot order the runpath: ${name} is chosen from ${wanted}, but ${other} holds another ${name} and must come before it (${conflict.why})`;
}

function mismatchLine(mismatches: readonly ProofMismatch[]): string {
  const each = mismatches.map(({ name, chosen, loads }) => `${byteStringToText(name)}: chosen ${chosen}, loaded ${loads}`);
  return `the loader would not load what was chosen: ${each.join('; ')}`;
}

/** The search list the file will have: its tag kept (default semantics), or DT_RUNPATH (--nixpkgs-compat). */
function plannedList(value: ByteString | null, facts: ResolverFacts, semantics: Semantics): PlannedSearchList {
  const keepsRpath = semantics === 'default' && facts.object.rpath !== null;
  return keepsRpath ? { runpath: null, rpath: value } : { runpath: value, rpath: null };
}

export async function settleRunpath(inputs: SettleInputs, prover: RunpathProver): Promise<SettledRunpath> {
  const { facts, resolution, semantics } = inputs;
  const chosen = chosenLibraries(inputs, prover);
  const view = await prover.fileView(inputs.path, facts.object);
  let entries: readonly ByteString[] | null = resolution.runpath?.map((placed) => placed.entry) ?? null;
  if (resolution.runpath !== null && semantics === 'default') {
    const order = await orderRunpath(resolution.runpath, chosen, view.oracle());
    if (order.kind === 'conflict') return { kind: 'refused', message: conflictLine(order, inputs.libcDir) };
    entries = order.entries;
  }
  const runpath = entries?.map((dir) => ({ dir, hook: resolution.kept.includes(dir) ? null : RESOLVER_HOOK_NAME })) ?? null;
  // The other hooks, composed as phase 2 composes them (process-file.ts), make the runpath the loader will read.
  const oldRunpath = facts.object.runpath ?? facts.object.rpath;
  const file: FileFacts = {
    path: inputs.path,
    relativePath: inputs.relativePath,
    isSharedObject: facts.object.type === ET.ET_DYN && facts.object.interpreter === null,
    machine: facts.machine,
  };
  const composed =
    runpath === null
      ? composeRunpath(inputs.hooks, file, oldRunpath, semantics)
      : composeAfterResolver(inputs.hooks, file, runpath, semantics);
  const mismatches = await view.mismatches(plannedList(composed?.value ?? oldRunpath, facts, semantics), chosen);
  if (mismatches.length > 0) return { kind: 'refused', message: mismatchLine(mismatches) };
  return { kind: 'settled', runpath };
}
