// What the loader finds at each path it tries, read once per run however many searches try it: the
// directory's stat and listing, and for a file the loader's checks of its header (open-verify.ts) and
// its facts (object-facts.ts), from one open. These follow from the file system alone; what a search
// makes of them (a directory marked missing, a file passed over) stays the search's (link-namespace.ts),
// so a cached answer leaves every search as the loader's own.

import { readdirSync } from 'node:fs';
import { type ByteString, bytesToByteString } from '../elf/elf.js';
import type { Lookup, SystemRoot } from './system-root.js';
import type { MachineAbi } from './machine-abi.js';
import type { ObjectFacts, ObjectFactsCache } from './object-facts.js';
import { verifyFile, verifyPath } from './open-verify.js';

export type CandidateCheck =
  | { readonly kind: 'found'; readonly facts: ObjectFacts }
  /** Passed over as a missing file is; `reason` when the file exists (another class or machine…). */
  | { readonly kind: 'next'; readonly errno: string; readonly reason: string | null }
  | { readonly kind: 'fatal'; readonly message: string };

/** A name a directory's listing answers for: a file name, not a path, '.' or '..' (the open answers for those). */
export const isFileName = (name: ByteString): boolean => name !== '' && name !== '.' && name !== '..' && !name.includes('/');

export class CandidateFiles {
  private readonly root: SystemRoot;
  private readonly objects: ObjectFactsCache;
  private readonly lookups = new Map<ByteString, Lookup>();
  /** By the loader's machine, class and byte order, then by path. */
  private readonly checks = new Map<string, Map<ByteString, Promise<CandidateCheck>>>();
  private readonly listings = new Map<ByteString, ReadonlySet<ByteString> | null>();

  constructor(root: SystemRoot, objects: ObjectFactsCache) {
    this.root = root;
    this.objects = objects;
  }

  /** What `path` names (a directory of a search list), its links followed: root.lookUp, once per path. */
  lookUp(path: ByteString): Lookup {
    let found = this.lookups.get(path);
    if (found === undefined) {
      found = this.root.lookUp(path);
      this.lookups.set(path, found);
    }
    return found;
  }

  /** Every name `directory` (a path of the emulated system) holds, listed once per run; null when it cannot be listed. */
  entriesOf(directory: ByteString): ReadonlySet<ByteString> | null {
    let entries = this.listings.get(directory);
    if (entries === undefined) {
      entries = null;
      const found = this.lookUp(directory);
      if (found.ok && found.stats.isDirectory()) {
        try {
          entries = new Set(readdirSync(found.hostPath, { encoding: 'buffer' }).map(bytesToByteString));
        } catch {
          // Searchable but not readable (or gone): the files in it can still be opened, so nothing is known.
        }
      }
      this.listings.set(directory, entries);
    }
    return entries;
  }

  /**
   * Whether a search of `paths` (a directory with its hwcaps subdirectories, as the loader tries them)
   * could find `name`: false only for a file name (isFileName) that no path can hold, each being missing
   * or listed without it; any other name may always be found (the open answers for it). A cheap answer
   * from what the run has read, before any candidate is tried.
   */
  mayFind(paths: readonly ByteString[], name: ByteString): boolean {
    if (!isFileName(name)) return true;
    return paths.some((path) => {
      const found = this.lookUp(path);
      return found.ok && found.stats.isDirectory() && (this.entriesOf(path)?.has(name) ?? true);
    });
  }

  /** What a loader of `abi` makes of the file at `path`: a usable object and its facts, one to go past, or the end of the load. */
  check(path: ByteString, abi: MachineAbi, littleEndian: boolean): Promise<CandidateCheck> {
    const loader = `${abi.machine}/${abi.elfClass}/${littleEndian ? 'le' : 'be'}`;
    let checks = this.checks.get(loader);
    if (checks === undefined) {
      checks = new Map();
      this.checks.set(loader, checks);
    }
    let check = checks.get(path);
    if (check === undefined) {
      check = this.checkFile(path, abi, littleEndian);
      checks.set(path, check);
    }
    return check;
  }

  private async checkFile(path: ByteString, abi: MachineAbi, littleEndian: boolean): Promise<CandidateCheck> {
    const found = verifyPath(this.root, path);
    if ('kind' in found) return found.kind === 'fatal' ? found : { kind: 'next', errno: found.errno, reason: found.reason };
    const known = await this.objects.tryGet(found.hostPath, found.stats);
    const verdict = await verifyFile(found, known?.header ?? null, abi, littleEndian);
    if (verdict.kind === 'fatal') return verdict;
    if (verdict.kind === 'passed-over') return { kind: 'next', errno: verdict.errno, reason: verdict.reason };
    // A file the loader maps but the reader cannot read: get() throws the reader's error, naming the file.
    return { kind: 'found', facts: known ?? (await this.objects.get(found.hostPath, found.stats)) };
  }
}
