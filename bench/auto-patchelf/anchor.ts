// The anchor: Nixpkgs' auto-patchelf.py, run as the autoPatchelfHook runs it, on a fresh copy of a
// case's tree, and what it says it did, parsed from its stdout.
//
// The script is public (MIT, Nixpkgs) and is not part of this project: fetch it once into
// bench/.cache/auto-patchelf/ (git-ignored), byte for byte:
//
//   curl -fsSL -o bench/.cache/auto-patchelf/auto-patchelf.py \
//     https://raw.githubusercontent.com/NixOS/nixpkgs/0137840114d1444c766db37c01e96258e4edf5fb/pkgs/by-name/au/auto-patchelf/source/auto-patchelf.py
//
// (18,369 bytes, sha256 below). It runs with Debian's python3-pyelftools under /usr/bin/python3,
// finds `patchelf` through PATH, and reads the interpreter and the libc directory from
// $NIX_BINTOOLS/nix-support (assemble.sh makes stand-ins).

import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AP_CACHE, bintoolsDir, inCopy, type AutoPatchelfCase, type PatchelfVersion, patchelfPathDir } from './cases.js';

const NIXPKGS_COMMIT = '0137840114d1444c766db37c01e96258e4edf5fb';
const ANCHOR_URL = `https://raw.githubusercontent.com/NixOS/nixpkgs/${NIXPKGS_COMMIT}/pkgs/by-name/au/auto-patchelf/source/auto-patchelf.py`;
const ANCHOR_SHA256 = '3c1c199ae929afc73b0ff6d5ab0be296289644f00ec638ba5b7500a8c21ec49c';
const ANCHOR_SCRIPT = join(AP_CACHE, 'auto-patchelf.py');
/** Debian's python3 with python3-pyelftools (a python3 earlier on PATH may lack pyelftools). */
const PYTHON = '/usr/bin/python3';

/** Throws, saying how to fetch it, unless the anchor script is there with the pinned sha256. */
export async function checkAnchorScript(): Promise<void> {
  const fetch = `fetch it: curl -fsSL -o ${ANCHOR_SCRIPT} ${ANCHOR_URL}`;
  if (!existsSync(ANCHOR_SCRIPT)) throw new Error(`${ANCHOR_SCRIPT} is missing; ${fetch}`);
  const sha256 = createHash('sha256')
    .update(await readFile(ANCHOR_SCRIPT))
    .digest('hex');
  if (sha256 !== ANCHOR_SHA256) throw new Error(`${ANCHOR_SCRIPT} has sha256 ${sha256}, not ${ANCHOR_SHA256}; ${fetch}`);
}

/** auto-patchelf.py's command line for a case on the copy at `copy`, as the hook builds it. */
export function anchorArgv(c: AutoPatchelfCase, copy: string): string[] {
  const list = (flag: string, values: readonly string[]): string[] => (values.length === 0 ? [] : [flag, ...values]);
  const inTheCopy = (flag: string, values: readonly string[]): string[] =>
    list(
      flag,
      values.map((value) => inCopy(copy, value)),
    );
  return [
    PYTHON,
    ANCHOR_SCRIPT,
    ...list('--ignore-missing', c.ignoreMissing),
    ...inTheCopy('--paths', c.paths),
    ...inTheCopy('--libs', c.libs),
    ...inTheCopy('--runtime-dependencies', c.runtimeDependencies),
    ...inTheCopy('--append-rpaths', c.appendRpaths),
  ];
}

/** The environment the anchor runs in: the chosen patchelf first on PATH, the stand-in bintools. */
export const anchorEnv = (c: AutoPatchelfCase, patchelf: PatchelfVersion): NodeJS.ProcessEnv => ({
  ...process.env,
  PATH: `${patchelfPathDir(patchelf)}:/usr/bin:/bin`,
  NIX_BINTOOLS: bintoolsDir(c.bintools),
  LC_ALL: 'C',
});

/** What the anchor said about one file. Paths are as it printed them (absolute, in the copy). */
export interface AnchorFileLog {
  interpreterSet: boolean;
  /** The runpath it passed to `patchelf --set-rpath`, or null when it left the runpath alone. */
  runpathSet: string | null;
  /** Each dependency it resolved through its index, and the directory it added for it. */
  readonly found: { name: string; dir: string }[];
  /** Its reason, when it skipped the file. */
  skipped: string | null;
}

export interface AnchorLog {
  readonly files: Map<string, AnchorFileLog>;
  /** Its closing lines: `error: ... could not satisfy dependency NAME wanted by FILE`. */
  readonly missing: { name: string; file: string }[];
  /** `warn: ... ignoring missing NAME wanted by FILE`. */
  readonly ignored: { name: string; file: string }[];
}

/** Reads auto-patchelf.py's stdout (its messages are stable across Nixpkgs versions since 2022). */
export function parseAnchorLog(stdout: string): AnchorLog {
  const files = new Map<string, AnchorFileLog>();
  const fileLog = (path: string): AnchorFileLog => {
    const known = files.get(path);
    if (known !== undefined) return known;
    const created: AnchorFileLog = { interpreterSet: false, runpathSet: null, found: [], skipped: null };
    files.set(path, created);
    return created;
  };
  const log: AnchorLog = { files, missing: [], ignored: [] };
  let current: AnchorFileLog | null = null;
  const rules: [RegExp, (a: string, b: string) => void][] = [
    [
      /^setting interpreter of (.*)$/,
      (file) => {
        fileLog(file).interpreterSet = true;
      },
    ],
    [
      /^searching for dependencies of (.*)$/,
      (file) => {
        current = fileLog(file);
      },
    ],
    [/^ {4}(.*) -> found: (.*)$/, (name, dir) => current?.found.push({ name, dir })],
    [
      /^setting RPATH to: (.*)$/,
      (runpath) => {
        if (current !== null) current.runpathSet = runpath;
      },
    ],
    [
      /^skipping (.*) because (.*)$/,
      (file, reason) => {
        fileLog(file).skipped = reason;
      },
    ],
    [/^error: auto-patchelf could not satisfy dependency (.*) wanted by (.*)$/, (name, file) => log.missing.push({ name, file })],
    [/^warn: auto-patchelf ignoring missing (.*) wanted by (.*)$/, (name, file) => log.ignored.push({ name, file })],
  ];
  for (const line of stdout.split('\n')) {
    for (const [pattern, act] of rules) {
      const m = pattern.exec(line);
      if (m === null) continue;
      act(m[1] ?? '', m[2] ?? '');
      break;
    }
  }
  return log;
}
