// Building small, purpose-made ELF inputs for the rewrite regression tests (they run through runOn in
// fixtures.ts: natively for x86_64, under qemu-aarch64 for aarch64), and whole-file facts to check the
// results with; readelf.ts reads them back. Every external command runs without a shell and under a
// time limit.

import { createHash } from 'node:crypto';
import { mkdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BuildArch } from './arch.js';
import { compilerFor, requireTool } from './fixtures.js';
import { mustExec, type ExecResult } from './exec.js';
import { offsetOfAddress, programHeaders, symbolAddress, type SegmentRow } from './readelf.js';
import { relocateProgramHeaders } from './rw-elf.js';

/**
 * Compiles and links `sources` (file name → text, written into `dir`) into `dir/output` with the given
 * compiler driver flags. Returns the output path.
 */
export async function compile(
  arch: BuildArch,
  dir: string,
  output: string,
  sources: Record<string, string>,
  flags: readonly string[] = [],
): Promise<string> {
  const names: string[] = [];
  for (const [name, text] of Object.entries(sources)) {
    await writeFile(join(dir, name), text);
    if (/\.(c|cc|cpp|s|S)$/.test(name)) names.push(name);
  }
  const cxx = names.some((name) => /\.(cc|cpp)$/.test(name));
  const out = join(dir, output);
  const extra: string[] = [];
  if (arch !== 'x86_64' && flags.includes('-fuse-ld=lld')) {
    // gcc 12 has no --ld-path, and a cross gcc looks for ld.lld only in its own directories and -B ones.
    const shim = join(dir, '.lld-shim');
    await mkdir(shim, { recursive: true });
    await symlink(requireTool('ld.lld'), join(shim, 'ld.lld')).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
    extra.push(`-B${shim}/`);
  }
  await mustExec(compilerFor(arch, cxx ? 'c++' : 'c'), [...names, ...extra, ...flags, '-o', out], { cwd: dir, timeoutMs: 120_000 });
  return out;
}

/** Bytes of .rodata that a test moves the program header table into (PHDR_ROOM_SOURCE declares them). */
const PHDR_ROOM_SIZE = 1024;
export const PHDR_ROOM_SOURCE = `__attribute__((used, aligned(64))) const unsigned char phdr_room[${PHDR_ROOM_SIZE}] = { 1 };\n`;

/**
 * Links `sources` (one of them holds PHDR_ROOM_SOURCE) into DIR/LINKED with one RX segment from offset
 * 0, so that phdr_room lies in the first PT_LOAD, and returns the file's bytes with the program header
 * table moved there, its old place taken by live data (relocateProgramHeaders), and where it now is.
 */
export async function tableMovedIntoRoom(
  arch: BuildArch,
  dir: string,
  linked: string,
  sources: Record<string, string>,
  flags: readonly string[],
  spareNullEntries: number,
): Promise<{ bytes: Uint8Array; roomOffset: number }> {
  const file = await compile(arch, dir, linked, sources, ['-Wl,-z,noseparate-code', ...flags]);
  const roomOffset = offsetOfAddress(await programHeaders(file), await symbolAddress(file, 'phdr_room'));
  const bytes = relocateProgramHeaders(new Uint8Array(await readFile(file)), {
    roomOffset,
    roomSize: PHDR_ROOM_SIZE,
    spareNullEntries,
    occupyOldPlace: true,
  });
  return { bytes, roomOffset };
}

/** The default GNU ld linker script of the driver with these flags (between the ===== lines of --verbose). */
export async function defaultLinkerScript(arch: BuildArch, dir: string, flags: readonly string[]): Promise<string> {
  await writeFile(join(dir, 'empty.c'), 'int main(void) { return 0; }\n');
  const text = (await mustExec(compilerFor(arch), ['empty.c', ...flags, '-Wl,--verbose', '-o', join(dir, 'empty')], { cwd: dir })).stdout;
  const lines = text.split('\n');
  const start = lines.findIndex((line) => line.startsWith('====='));
  const end = lines.findIndex((line, i) => i > start && line.startsWith('====='));
  if (start < 0 || end < 0) throw new Error('no default linker script in ld --verbose output');
  return lines.slice(start + 1, end).join('\n');
}

/** Output of a run for an assertion message. */
export function describeRun(result: ExecResult): string {
  return `exit ${String(result.code)} signal ${String(result.signal)}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`;
}

// ---- Whole-file facts ----

export interface FileState {
  readonly sha256: string;
  readonly size: number;
  readonly mtimeMs: number;
  readonly mode: number;
}

export async function fileState(file: string): Promise<FileState> {
  const [bytes, info] = await Promise.all([readFile(file), stat(file)]);
  return { sha256: createHash('sha256').update(bytes).digest('hex'), size: bytes.length, mtimeMs: info.mtimeMs, mode: info.mode & 0o7777 };
}

/** Every offset where `needle` occurs in `haystack`. */
export function occurrences(haystack: Uint8Array, needle: Uint8Array): number[] {
  const buffer = Buffer.from(haystack.buffer, haystack.byteOffset, haystack.byteLength);
  const found: number[] = [];
  for (let at = buffer.indexOf(needle); at >= 0; at = buffer.indexOf(needle, at + 1)) found.push(at);
  return found;
}

/** Problems with the PT_LOADs of a file: order, congruence, overlap of the pages they map. */
export function loadProblems(rows: readonly SegmentRow[]): string[] {
  const loads = rows.filter((r) => r.type === 'LOAD');
  const problems: string[] = [];
  loads.forEach((load, i) => {
    const where = `LOAD #${i} (offset 0x${load.offset.toString(16)}, vaddr 0x${load.vaddr.toString(16)}, align 0x${load.align.toString(16)})`;
    if (load.align > 1 && load.vaddr % load.align !== load.offset % load.align) problems.push(`${where}: p_vaddr ≢ p_offset (mod p_align)`);
    if (load.filesz > load.memsz) problems.push(`${where}: p_filesz > p_memsz`);
    const previous = loads[i - 1];
    if (previous !== undefined) {
      if (load.vaddr <= previous.vaddr) problems.push(`${where}: not sorted by p_vaddr`);
      if (load.vaddr < previous.vaddr + previous.memsz) {
        problems.push(`${where}: overlaps the previous LOAD in memory`);
      }
    }
  });
  return problems;
}
