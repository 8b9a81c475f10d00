// The floor under a patched file: the system calls `apply` makes for one, without any planning. Every
// file of a fresh copy of TREE is opened and its first 4 KiB read (the sniff); each ELF file is then
// fstat'ed, read once more, written six times past its end (900 bytes each, about what the append
// tier adds: the closure's files grow by 5.3 KiB on average), truncated to its new size and closed;
// with the lock of src/write/file-lock.ts around the writes, and without. What is left of a per-file
// budget after this floor is what the planning and V8's warm-up may take. In the same rounds: the
// whole `cuda-patchelf apply --jobs 1` process (dist/, so `npm run build` first) and `node -e 0`.
//
//   npx vite-node bench/write-floor.ts TREE [ROUNDS]
//
// Each round copies TREE for each variant (cp -a; the copy's time is not counted) and runs the
// variants in a rotating order. Prints per round and the medians, in µs per ELF file (the non-ELF
// files' sniffs included, as in apply's per-ELF figure); node -e 0 in ms.

import { execFileSync } from 'node:child_process';
import { closeSync, fstatSync, ftruncateSync, mkdtempSync, openSync, readdirSync, readSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { lockName, takeLock } from '../src/write/file-lock.js';

const [tree, roundsArgument = '3'] = process.argv.slice(2);
if (tree === undefined) throw new Error('usage: vite-node bench/write-floor.ts TREE [ROUNDS]');
const rounds = Number(roundsArgument);

function regularFiles(dir: string, found: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) regularFiles(path, found);
    else if (entry.isFile()) found.push(path);
  }
  return found;
}

const head = Buffer.alloc(4096);
const block = Buffer.alloc(4096);
const appended = Buffer.alloc(900, 1);
const WRITES = 6;

/** Opens `path` and reads its first 4 KiB: the descriptor when it is an ELF file, else null (closed). */
function openIfElf(path: string, flags: 'r' | 'r+'): number | null {
  const fd = openSync(path, flags);
  if (readSync(fd, head, 0, head.length, 0) >= 64 && head.readUInt32BE(0) === 0x7f454c46) return fd;
  closeSync(fd);
  return null;
}

function writeAppended(fd: number, end: number): void {
  for (let i = 0; i < WRITES; i++) writeSync(fd, appended, 0, appended.length, end + i * appended.length);
  ftruncateSync(fd, end + WRITES * appended.length);
}

/** The floor over every file of `root`, in µs (all files' time). */
async function floorRun(root: string, locked: boolean): Promise<number> {
  const started = performance.now();
  for (const path of regularFiles(root)) {
    const fd = openIfElf(path, 'r+');
    if (fd === null) continue;
    try {
      const stats = fstatSync(fd);
      readSync(fd, block, 0, block.length, Math.max(0, Math.min(stats.size - block.length, 8192)));
      const lock = locked ? await takeLock(lockName(stats), path) : null;
      writeAppended(fd, stats.size);
      if (lock?.kind === 'locked') lock.release();
    } finally {
      closeSync(fd);
    }
  }
  return (performance.now() - started) * 1000;
}

const cli = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));

/** The whole apply process over `root`, in µs. */
function applyRun(root: string): number {
  const started = performance.now();
  execFileSync(
    process.execPath,
    [cli, 'apply', '--jobs', '1', '--cuda-compat', '/nix/store/00000000000000000000000000000000-cuda_compat', root],
    { stdio: 'ignore' },
  );
  return (performance.now() - started) * 1000;
}

function nodeStartMs(): number {
  const started = performance.now();
  execFileSync(process.execPath, ['-e', '0']);
  return performance.now() - started;
}

const elfFiles = regularFiles(tree).filter((path) => {
  const fd = openIfElf(path, 'r');
  if (fd !== null) closeSync(fd);
  return fd !== null;
}).length;
if (elfFiles === 0) throw new Error(`no ELF file under ${tree}`);

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor((values.length - 1) / 2)] ?? NaN;
type Variant = 'floor without lock' | 'floor with lock' | 'apply --jobs 1';
const variants: Variant[] = ['floor without lock', 'floor with lock', 'apply --jobs 1'];
const results = new Map<Variant, number[]>(variants.map((variant) => [variant, []]));
const nodeStarts: number[] = [];
const scratch = mkdtempSync(join(tmpdir(), 'write-floor-'));
try {
  for (let round = 0; round < rounds; round++) {
    for (const variant of [...variants.slice(round % variants.length), ...variants.slice(0, round % variants.length)]) {
      const copy = join(scratch, 'tree');
      rmSync(copy, { recursive: true, force: true });
      execFileSync('cp', ['-a', tree, copy]);
      execFileSync('sync');
      const micros = variant === 'apply --jobs 1' ? applyRun(copy) : await floorRun(copy, variant === 'floor with lock');
      results.get(variant)?.push(micros / elfFiles);
      console.log(`round ${round + 1}, ${variant}: ${(micros / elfFiles).toFixed(1)} µs per ELF file`);
    }
    nodeStarts.push(nodeStartMs());
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
console.log(`${elfFiles} ELF files under ${tree}`);
for (const [variant, values] of results)
  console.log(`median ${variant}: ${median(values).toFixed(1)} µs per ELF file (${values.map((value) => value.toFixed(1)).join(' ')})`);
console.log(`median node -e 0: ${median(nodeStarts).toFixed(0)} ms (${nodeStarts.map((value) => value.toFixed(0)).join(' ')})`);
