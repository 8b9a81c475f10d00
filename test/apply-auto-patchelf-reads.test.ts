// What `--auto-patchelf` reads, seen from the kernel's side: the built CLI runs under strace, which lists
// every open and positional read of the tree's files, in this thread and in worker threads alike. Phase 1
// (the index) opens every file of the tree once; phase 2 (planning) does not open a file that is not
// ELF again, nor the later name of a hard-linked file, and reads none of the bytes phase 1 read of an
// ELF file again: it reads them from what phase 1 kept.

import { copyFile, link, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileLibrary, compileProgram, writeSources } from './helpers/compile.js';
import { mustExec } from './helpers/exec.js';
import { cudaFixture, requireTool } from './helpers/fixtures.js';
import { assertCliBuilt, cliPath } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';

/** One opening of a file: the byte ranges read through it, [start, end). */
type Opening = [number, number][];

/**
 * Each file under `root` (by path) -> its openings in order, from an `strace -f -y -s 0` log of openat and
 * pread64. A call a thread switch split in two (`<unfinished ...>`, then `<... resumed>`, its result padded) is
 * joined first.
 */
function openingsUnder(log: string, root: string): Map<string, Opening[]> {
  const pending = new Map<string, string>();
  const calls: string[] = [];
  for (const line of log.split('\n')) {
    const [pid = '', ...rest] = line.split(' ');
    const text = rest.join(' ').trim();
    if (text.endsWith('<unfinished ...>')) pending.set(pid, text.slice(0, -'<unfinished ...>'.length));
    else if (/^<\.\.\. \w+ resumed>/.test(text)) {
      calls.push((pending.get(pid) ?? '') + text.replace(/^<\.\.\. \w+ resumed>/, ''));
      pending.delete(pid);
    } else if (text !== '') calls.push(text);
  }
  const openings = new Map<string, Opening[]>();
  const byFd = new Map<string, Opening>();
  for (const call of calls) {
    const opened = /^openat\(.*, "([^"]*)", ([^)]*)\)\s*=\s*(\d+)</.exec(call);
    if (opened !== null) {
      // The walk's directory reads are not the files'.
      if (opened[2]?.includes('O_DIRECTORY') === true) continue;
      const [, path = '', , fd = ''] = opened;
      if (!path.startsWith(`${root}/`)) continue;
      const opening: Opening = [];
      openings.set(path, [...(openings.get(path) ?? []), opening]);
      byFd.set(fd, opening);
      continue;
    }
    const read = /^pread64\((\d+)<([^>]*)>, .*, (\d+), (\d+)\)\s*=\s*(\d+)$/.exec(call);
    if (read === null) continue;
    const [, fd = '', path = '', , offset = '', got = ''] = read;
    if (!path.startsWith(`${root}/`)) continue;
    const opening = byFd.get(fd);
    if (opening === undefined) throw new Error(`a read of ${path} through a descriptor whose open was not seen: ${call}`);
    opening.push([Number(offset), Number(offset) + Number(got)]);
  }
  return openings;
}

function overlaps(a: Opening, b: Opening): [number, number][] {
  return a.flatMap(([start, end]) =>
    b.filter(([s, e]) => s < end && start < e).map(([s, e]): [number, number] => [Math.max(s, start), Math.min(e, end)]),
  );
}

let work = '';
let tree = '';

beforeAll(async () => {
  assertCliBuilt();
  requireTool('strace');
  work = await makeTempDir('ap-reads');
  tree = join(work, 'tree');
  const source = await writeSources(join(work, 'src'), {
    'a.c': 'int a(void) { return 1; }\n',
    'prog.c': 'int a(void);\nint main(void) { return a() == 1 ? 0 : 1; }\n',
  });
  const libA = await compileLibrary(join(tree, 'lib', 'libA.so.1'), source('a.c'));
  await compileProgram(join(tree, 'bin', 'prog'), source('prog.c'), { needs: [libA] });
  // A real library of NVIDIA's, larger, with its own DT_NEEDED entries.
  await copyFile(cudaFixture('x86_64', 'libcudart11.0').path, join(tree, 'lib', 'libcudart.so.11.0'));
  await link(join(tree, 'lib', 'libA.so.1'), join(tree, 'lib', 'libA-again.so.1'));
  await writeFile(join(tree, 'README'), 'not ELF\n');
  await writeFile(join(tree, 'bin', 'script'), '#!/bin/sh\nexit 0\n');
}, 60_000);

afterAll(async () => {
  if (work !== '') await rm(work, { recursive: true, force: true });
});

describe('apply --auto-patchelf reads each file once', () => {
  for (const jobs of ['1', '2']) {
    it(`--jobs ${jobs}: phase 2 opens only the ELF files to plan, and reads none of the bytes phase 1 read`, async () => {
      const log = join(work, `strace-${jobs}.log`);
      const args = ['plan', '--jobs', jobs, '--auto-patchelf', '--interpreter', '/lib64/ld-linux-x86-64.so.2', '--json', tree];
      const traced = ['-f', '-qq', '-y', '-s', '0', '-e', 'trace=openat,pread64', '-o', log, process.execPath, cliPath, ...args];
      const result = await mustExec(requireTool('strace'), traced, { timeoutMs: 60_000 });
      const report = JSON.parse(result.stdout) as { workerThreads: number; summary: { wouldPatch: Record<string, number> } };
      // Threads or not, as asked: on a machine of one CPU --jobs 2 runs in one thread too.
      expect(report.workerThreads).toBeLessThanOrEqual(Number(jobs) === 1 ? 0 : 2);
      expect(Object.values(report.summary.wouldPatch).reduce((a, b) => a + b, 0)).toBe(3);
      const openings = openingsUnder(await readFile(log, 'utf8'), tree);
      const counts = Object.fromEntries([...openings].map(([path, list]) => [path.slice(tree.length + 1), list.length]));
      expect(counts).toEqual({
        README: 1,
        'bin/script': 1,
        // The first name of the inode in walk order ('-' sorts before '.') is the one patched.
        'lib/libA.so.1': 1,
        'bin/prog': 2,
        'lib/libA-again.so.1': 2,
        'lib/libcudart.so.11.0': 2,
      });
      for (const name of ['bin/prog', 'lib/libA-again.so.1', 'lib/libcudart.so.11.0']) {
        const [first = [], second = []] = openings.get(join(tree, name)) ?? [];
        expect(first.length, `${name}: phase 1 reads`).toBeGreaterThan(0);
        expect(overlaps(first, second), `${name}: bytes read by both phases`).toEqual([]);
      }
    }, 90_000);
  }
});
