// What the auto-patchelf resolver reads of an ELF file, through the ELF facade: the header (machine,
// OS ABI), the interpreter, the runpath and, for a file to resolve, its DT_NEEDED entries and
// `.note.dlopen` dependencies. A few small positional reads per file; nothing is written.

import { type ByteString, type DlopenDependency, dlopenNotes, DT, ElfFile, type ReadSeed, splitRunpath } from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { skipReason, type SkipReason } from '../edit/skip-reason.js';
import type { ObjectFacts, ObjectFactsCache } from '../loader/object-facts.js';
import { sniffWalkedFile } from './walked-file.js';

/** What the library index records of a library, and the runpath entries it follows from it. */
export interface LibraryFacts {
  readonly machine: number;
  readonly osAbi: number;
  /** Why apply leaves the file alone (static, debug-info…), or null when it patches it. */
  readonly skip: SkipReason | null;
  /** DT_RUNPATH's entries, else DT_RPATH's (byte strings); empty without either. */
  readonly runpath: readonly ByteString[];
}

/** What the resolver reads of a file of the trees. */
export interface ResolverFacts extends LibraryFacts {
  /** PT_INTERP's path (a byte string), or null. */
  readonly interpreter: ByteString | null;
  /** DT_NEEDED, in order; empty when apply leaves the file alone. */
  readonly needed: readonly ByteString[];
  readonly dlopen: readonly DlopenDependency[];
  /** A line for each `.note.dlopen` note that could not be read (it is ignored). */
  readonly malformedNotes: readonly string[];
  /** What the loader reads of it, from the same open: the proof of a runpath (runpath-proof.ts) reads it through these. */
  readonly object: ObjectFacts;
}

/** What the index records of an open ELF file. */
async function libraryFactsOf(file: ElfFile): Promise<LibraryFacts> {
  return {
    machine: file.header.e_machine,
    osAbi: file.header.osabi,
    skip: skipReason(file.image),
    runpath: splitRunpath((await file.lastDynString(DT.DT_RUNPATH)) ?? (await file.lastDynString(DT.DT_RPATH))),
  };
}

/**
 * What the index records of the library at `path` (a symbolic link followed), or null when it is not
 * an ELF file or cannot be read: a library candidate that cannot be read is not one. What the loader
 * reads of it is read when a proof first looks for it (most indexed libraries no proof looks at).
 */
export async function readLibraryFacts(path: string): Promise<LibraryFacts | null> {
  const opened = await ElfFile.open(path, { followLink: true });
  if (opened.kind !== 'elf') return null;
  const { file } = opened;
  try {
    return await libraryFactsOf(file);
  } catch (error) {
    if (!(error instanceof CudaPatchelfError)) throw error;
    return null;
  } finally {
    file.close();
  }
}

/**
 * What the first phase learned of a file the walk listed: its kind from its first bytes, and for an ELF
 * file its facts and what was read of it (the seed the second phase reads through; its blocks only
 * within `seedBytes`). Null when it cannot be read: the pass that patches it reports why.
 */
export type WalkedFileFacts =
  | { readonly kind: 'not-elf' | 'archive' }
  | { readonly kind: 'elf'; readonly facts: ResolverFacts; readonly seed: ReadSeed };

export async function readWalkedFileFacts(path: string, seedBytes: number, objects: ObjectFactsCache): Promise<WalkedFileFacts | null> {
  const sniffed = sniffWalkedFile(path);
  if (sniffed.kind === 'failed') return null;
  if (sniffed.kind === 'skipped') return sniffed.reason === 'archive' || sniffed.reason === 'not-elf' ? { kind: sniffed.reason } : null;
  const { source } = sniffed;
  try {
    const facts = await factsOf(await ElfFile.read(source), objects);
    return { kind: 'elf', facts, seed: source.seed(seedBytes) };
  } catch (error) {
    // A file whose structures cannot be read is reported by the pass that patches it; a bug is thrown.
    if (!(error instanceof CudaPatchelfError)) throw error;
    return null;
  } finally {
    source.close();
  }
}

async function factsOf(file: ElfFile, objects: ObjectFactsCache): Promise<ResolverFacts> {
  const library = await libraryFactsOf(file);
  const wanted = library.skip === null;
  const notes = wanted ? dlopenNotes(await file.notes()) : { entries: [], malformed: [] };
  return {
    ...library,
    interpreter: file.interpreter,
    needed: wanted ? await file.dynStrings(DT.DT_NEEDED) : [],
    dlopen: notes.entries.map((entry) => entry.sonames),
    malformedNotes: notes.malformed,
    object: await objects.ofFile(file),
  };
}
