// The edit operations on a file's dynamic array and interpreter: runpath, DT_NEEDED and PT_INTERP
// changes, as a person asks for them, turned into the WantedDynamic the planner places. Pure: strings
// are byte strings.

import { type ByteString, dedupeEntries, DT, EMPTY_BYTE_STRING, joinRunpath, splitRunpath } from '../elf/elf.js';
import type { CurrentEntry } from './edit-facts.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { WantedDynamic, WantedEntry } from './wanted.js';

/**
 * Which tag a new runpath value is written with:
 * - `keep`: the kind the file has (DT_RUNPATH when it has neither) — the default;
 * - `runpath`: DT_RUNPATH, converting a DT_RPATH (what patchelf --set-rpath does);
 * - `rpath`: DT_RPATH, converting a DT_RUNPATH (patchelf --force-rpath).
 */
export type RunpathTagPolicy = 'keep' | 'runpath' | 'rpath';

interface WorkingEntry {
  d_tag: number;
  readonly d_val: number;
  text: ByteString | null;
  /** The index of the original string, when this entry came from the file. */
  readonly previous: number | null;
}

const isRunpathTag = (tag: number): boolean => tag === DT.DT_RPATH || tag === DT.DT_RUNPATH;

function checkString(value: ByteString, what: string): void {
  if (value.includes('\0')) throw new CudaPatchelfError('usage', `${what} must not contain a NUL byte`);
}

/**
 * The longest interpreter path with its NUL: the kernel refuses a PT_INTERP larger than PATH_MAX
 * (fs/binfmt_elf.c), and so does glibc's loader when the path is handed to it.
 */
const INTERPRETER_MAX = 4096;

export class DynamicEditor {
  private readonly entries: WorkingEntry[];
  private readonly renames = new Map<ByteString, ByteString>();
  private readonly hasInterpreter: boolean;
  private interpreterPath: ByteString | null;

  /** `interpreter`: the file's PT_INTERP path, null when it has none. */
  constructor(current: readonly CurrentEntry[], interpreter: ByteString | null) {
    this.entries = current.map((e) => ({ d_tag: e.d_tag, d_val: e.d_val, text: e.text, previous: e.text === null ? null : e.d_val }));
    this.hasInterpreter = interpreter !== null;
    this.interpreterPath = interpreter;
  }

  /** The interpreter path (PT_INTERP, without its NUL), null when the file has none. */
  interpreter(): ByteString | null {
    return this.interpreterPath;
  }

  /**
   * Sets the interpreter path. A file without PT_INTERP (a library, a static program) is refused: a
   * program without one is not loaded through an interpreter, and adding one is not an edit of it.
   */
  setInterpreter(path: ByteString): void {
    if (!this.hasInterpreter)
      throw new CudaPatchelfError('unsupported', 'no interpreter (PT_INTERP) to set: the file is a library or statically linked');
    if (path === '') throw new CudaPatchelfError('usage', 'an interpreter path must not be empty');
    checkString(path, 'an interpreter path');
    if (path.length + 1 > INTERPRETER_MAX)
      throw new CudaPatchelfError(
        'usage',
        `an interpreter path of ${path.length} bytes is too long: the kernel takes ${INTERPRETER_MAX - 1} at most`,
      );
    this.interpreterPath = path;
  }

  /** The last entry with this tag: the one the loader keeps when a tag comes twice (patchelf reads it too). */
  private last(tag: number): WorkingEntry | undefined {
    return this.entries.filter((e) => e.d_tag === tag).at(-1);
  }

  /** The search path the loader uses: DT_RUNPATH if there is one, else DT_RPATH; null when neither. */
  runpath(): ByteString | null {
    return (this.last(DT.DT_RUNPATH) ?? this.last(DT.DT_RPATH))?.text ?? null;
  }

  /** The tag of the runpath the loader uses (DT_RUNPATH wherever it stands, else DT_RPATH), or null when there is none. */
  runpathTag(): number | null {
    return (this.last(DT.DT_RUNPATH) ?? this.last(DT.DT_RPATH))?.d_tag ?? null;
  }

  needed(): ByteString[] {
    return this.entries.filter((e) => e.d_tag === DT.DT_NEEDED).map((e) => e.text ?? EMPTY_BYTE_STRING);
  }

  soname(): ByteString | null {
    return this.last(DT.DT_SONAME)?.text ?? null;
  }

  /** Sets the runpath (null removes DT_RUNPATH and DT_RPATH entirely). */
  setRunpath(value: ByteString | null, policy: RunpathTagPolicy = 'keep'): void {
    const existing = this.entries.filter((e) => isRunpathTag(e.d_tag));
    if (value === null) {
      for (const entry of existing) this.entries.splice(this.entries.indexOf(entry), 1);
      return;
    }
    checkString(value, 'a runpath');
    if (policy === 'keep' && existing.length > 0) {
      // Both kinds present: both get the value, each keeps its tag.
      for (const entry of existing) entry.text = value;
      return;
    }
    const tag = policy === 'rpath' ? DT.DT_RPATH : DT.DT_RUNPATH;
    const [first, ...extra] = existing;
    if (first === undefined) {
      this.entries.push({ d_tag: tag, d_val: 0, text: value, previous: null });
      return;
    }
    first.d_tag = tag;
    first.text = value;
    for (const entry of extra) this.entries.splice(this.entries.indexOf(entry), 1);
  }

  /** Adds a DT_NEEDED entry before the existing ones (as patchelf does), unless the name is there. */
  addNeeded(name: ByteString): void {
    checkString(name, 'a needed library name');
    if (this.needed().includes(name)) return;
    const firstNeeded = this.entries.findIndex((e) => e.d_tag === DT.DT_NEEDED);
    this.entries.splice(Math.max(firstNeeded, 0), 0, { d_tag: DT.DT_NEEDED, d_val: 0, text: name, previous: null });
  }

  removeNeeded(name: ByteString): void {
    for (let i = this.entries.length - 1; i >= 0; i--) {
      const entry = this.entries[i];
      if (entry?.d_tag === DT.DT_NEEDED && entry.text === name) this.entries.splice(i, 1);
    }
  }

  /** Renames a DT_NEEDED entry; the version needs that name the library follow. */
  replaceNeeded(from: ByteString, to: ByteString): void {
    checkString(to, 'a needed library name');
    // A rename to the same name changes nothing; recorded, it would rewrite the version needs' names.
    if (from === to) return;
    for (const entry of this.entries) {
      if (entry.d_tag === DT.DT_NEEDED && entry.text === from) {
        entry.text = to;
        this.renames.set(from, to);
      }
    }
  }

  /** What the planner should make of the dynamic array. */
  wanted(): WantedDynamic {
    const entries = this.entries.map((e): WantedEntry => {
      if (e.text === null) return { d_tag: e.d_tag, d_val: e.d_val };
      return { d_tag: e.d_tag, text: e.text, previous: e.previous };
    });
    return { entries, versionNeedRenames: new Map(this.renames), interpreter: this.interpreterPath };
  }
}

/**
 * Adds directories to a runpath. With `dedupe`, entries already present are not added again and
 * empty entries are dropped.
 */
export function addRunpathEntries(
  value: ByteString | null,
  dirs: readonly ByteString[],
  position: 'prepend' | 'append',
  dedupe: boolean,
): ByteString {
  const old = splitRunpath(value);
  const added = position === 'prepend' ? [...dirs, ...old] : [...old, ...dirs];
  return joinRunpath(dedupe ? dedupeEntries(added) : added);
}

export function removeRunpathEntries(value: ByteString | null, dirs: readonly ByteString[]): ByteString {
  return joinRunpath(splitRunpath(value).filter((dir) => !dirs.includes(dir)));
}
