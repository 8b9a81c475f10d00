// The contenders of the closure benchmark: (a) cuda-patchelf apply, (b) the Nixpkgs hook sequence,
// (c) find | xargs patchelf, (d) the I/O floor. `{}` in argv stands for the fresh copy of the closure.

import { join } from 'node:path';

export type Group = 'a' | 'b' | 'c' | 'd';

export interface Contender {
  readonly id: string;
  readonly group: Group;
  readonly name: string;
  /** A few words, for the chart. */
  readonly short: string;
  /** What it runs, in words, for the results file. */
  readonly runs: string;
  readonly argv: readonly string[];
  readonly env?: NodeJS.ProcessEnv;
}

export interface ContenderTools {
  readonly cli: string;
  readonly cudaCompat: string;
  /** Debian's patchelf and, when there is one, the second patchelf: path and `--version` line each. */
  readonly patchelfs: readonly { readonly path: string; readonly version: string }[];
  readonly readHeads: string;
  /** NUL-separated ELF paths relative to the closure, for the floor. */
  readonly elfList: string;
}

const benchDir = join(import.meta.dirname, '..');

export function contenders(tools: ContenderTools): Contender[] {
  const apply = (jobs: number): Contender => ({
    id: `a${jobs}`,
    group: 'a',
    name: `(a) cuda-patchelf apply --jobs ${jobs}`,
    short: `(a) apply --jobs ${jobs}`,
    runs: `\`cuda-patchelf apply TREE --cuda-compat ${tools.cudaCompat} --jobs ${jobs}\` (driver + cuda-compat hooks; ${jobs === 1 ? 'one file at a time, no worker thread' : `${jobs} worker threads, the walk on the main thread`})`,
    argv: ['node', tools.cli, 'apply', '{}', '--cuda-compat', tools.cudaCompat, '--jobs', String(jobs)],
  });
  const nixpkgs = tools.patchelfs.map(
    (patchelf, i): Contender => ({
      id: `b${i + 1}`,
      group: 'b',
      name: `(b) Nixpkgs sequence, ${patchelf.version}`,
      short: `(b) Nixpkgs, ${patchelf.version}`,
      runs: `\`PATCHELF=${patchelf.path} bench/nixpkgs-sequence.sh TREE ${tools.cudaCompat}\`: autoFixElfFiles addDriverRunpath, then addCudaCompatRunpath`,
      argv: ['bash', join(benchDir, 'nixpkgs-sequence.sh'), '{}', tools.cudaCompat],
      env: { ...process.env, PATCHELF: patchelf.path },
    }),
  );
  const debianPatchelf = tools.patchelfs[0];
  if (debianPatchelf === undefined) throw new Error('no patchelf');
  return [
    apply(1),
    apply(2),
    ...nixpkgs,
    {
      id: 'c',
      group: 'c',
      name: `(c) find | xargs -P2 patchelf --add-rpath, ${debianPatchelf.version}`,
      short: '(c) find | xargs -P2 patchelf',
      runs: '`bench/closure/patchelf-xargs.sh TREE`: `find TREE -type f \\( -name "*.so" -o -name "*.so.*" -o -perm -u+x \\) | xargs -P2 -n1 patchelf --add-rpath /run/opengl-driver/lib` (driver directory only)',
      argv: ['bash', join(benchDir, 'closure', 'patchelf-xargs.sh'), '{}'],
      env: { ...process.env, PATCHELF: debianPatchelf.path },
    },
    {
      id: 'd',
      group: 'd',
      name: '(d) floor: open + read 4 KiB of every ELF file',
      short: '(d) floor: open + read 4 KiB',
      runs: '`read-heads TREE LIST` (bench/closure/read-heads.c): one process opens each ELF file of a precomputed list and reads its first 4 KiB; no walk, no parsing, no writes',
      argv: [tools.readHeads, '{}', tools.elfList],
    },
  ];
}
