// What a run left in a tree, read back with readelf (a tool that is neither side's): each ELF
// file's machine, interpreter, runpath and needed libraries, and the directories its runpath names.

import { execFile } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { lstat, open, readdir } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import pLimit from 'p-limit';
import { masked } from './cases.js';

const run = promisify(execFile);

export interface ElfFacts {
  /** readelf's name for e_machine: `Advanced Micro Devices X86-64`, `AArch64`... */
  readonly machine: string;
  readonly interpreter: string | null;
  /** DT_RUNPATH, else DT_RPATH, else null. */
  readonly runpath: string | null;
  readonly needed: readonly string[];
}

const ELF_MAGIC = Buffer.from([0x7f, 0x45, 0x4c, 0x46]);

async function isElf(file: string): Promise<boolean> {
  const handle = await open(file, 'r');
  try {
    const head = Buffer.alloc(4);
    const { bytesRead } = await handle.read(head, 0, 4, 0);
    return bytesRead === 4 && head.equals(ELF_MAGIC);
  } finally {
    await handle.close();
  }
}

/**
 * Every regular file (symbolic links left out, as both sides leave them) with the ELF magic under
 * each of `paths`, relative to `root`, in byte order. Node's recursive readdir goes into a directory
 * through a symbolic link too, which neither side walks: what is under one is left out, and seen
 * once, under its own directory.
 */
export async function elfFilesUnder(root: string, paths: readonly string[]): Promise<string[]> {
  const realRoot = realpathSync(root);
  const found: string[] = [];
  for (const path of paths) {
    for (const entry of await readdir(join(root, path), { recursive: true })) {
      const rel = join(path, entry);
      const stats = await lstat(join(root, rel));
      const throughLink = realpathSync(join(root, dirname(rel))) !== join(realRoot, dirname(rel));
      if (stats.isFile() && !throughLink && (await isElf(join(root, rel)))) found.push(rel);
    }
  }
  return found.sort();
}

function parseReadelf(stdout: string): ElfFacts {
  const one = (pattern: RegExp): string | null => pattern.exec(stdout)?.[1] ?? null;
  return {
    machine: one(/^\s*Machine:\s*(.*)$/m) ?? 'unknown',
    interpreter: one(/\[Requesting program interpreter: (.*)\]/),
    runpath: one(/Library runpath: \[(.*)\]/) ?? one(/Library rpath: \[(.*)\]/),
    needed: [...stdout.matchAll(/Shared library: \[(.*)\]/g)].map((m) => m[1] ?? ''),
  };
}

/** readelf -hldW of each file, `jobs` at a time: relative path -> facts. */
export async function readElfFacts(root: string, files: readonly string[], jobs = 2): Promise<Map<string, ElfFacts>> {
  const limit = pLimit(jobs);
  const facts = await Promise.all(
    files.map((file) =>
      limit(async () => {
        // readelf exits 1 on a warning it also prints; its stdout still holds the headers it read.
        const { stdout } = await run('readelf', ['-hldW', join(root, file)], {
          env: { LC_ALL: 'C', PATH: '/usr/bin:/bin' },
          maxBuffer: 64 * 2 ** 20,
        }).catch((error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }));
        return [file, parseReadelf(stdout)] as const;
      }),
    ),
  );
  return new Map(facts);
}

const ORIGIN = /\$ORIGIN|\$\{ORIGIN\}/g;

/**
 * The directories a runpath names for the file at `file` (in the copy at `copy`): `$ORIGIN` and
 * `${ORIGIN}` expanded, real paths where they exist, written `<tree>/...` inside the copy. Empty
 * entries are left out, as the loader does.
 */
export function runpathDirs(runpath: string | null, copy: string, file: string): string[] {
  if (runpath === null) return [];
  return runpath
    .split(':')
    .filter((entry) => entry !== '')
    .map((entry) => realDirectory(copy, resolve(entry.replace(ORIGIN, dirname(join(copy, file))))));
}

/** Whether a runpath entry is relocatable (names a directory by the file's own place). */
export const isOriginEntry = (entry: string): boolean => new RegExp(ORIGIN.source).test(entry);

/** A `<tree>/...` directory in a copy. */
export const unmask = (dir: string, copy: string): string => (dir.startsWith('<tree>') ? join(copy, dir.slice('<tree>'.length)) : dir);

/** The first occurrence of each directory: a repeated one changes nothing for the loader. */
export const firstOccurrences = (dirs: readonly string[]): string[] => [...new Set(dirs)];

/** A directory a side names, by its real path where it exists, written `<tree>/...` inside the copy. */
export function realDirectory(copy: string, dir: string): string {
  try {
    return masked(copy, realpathSync(dir));
  } catch {
    return masked(copy, dir);
  }
}
