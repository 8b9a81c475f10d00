// Building small, purpose-made ELF inputs for the rewrite regression tests, and reading results back
// with binutils as an independent oracle (they run through runOn in fixtures.ts: natively for x86_64,
// under qemu-aarch64 for aarch64). Every external command runs without a shell and under a time limit.

import { createHash } from 'node:crypto';
import { mkdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BuildArch } from './arch.js';
import { compilerFor, requireTool } from './fixtures.js';
import { mustExec, type ExecResult } from './exec.js';

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

// ---- Reading results back with readelf (binutils, independent of the code under test) ----

export interface SegmentRow {
  readonly type: string;
  readonly offset: number;
  readonly vaddr: number;
  readonly paddr: number;
  readonly filesz: number;
  readonly memsz: number;
  readonly flags: string;
  readonly align: number;
}

const hexNumber = (text: string): number => Number(BigInt(text.startsWith('0x') ? text : `0x${text}`));

/** The program headers as readelf -lW lists them, in table order. */
export async function segments(file: string): Promise<SegmentRow[]> {
  const text = (await mustExec(requireTool('readelf'), ['-lW', file])).stdout;
  const rows: SegmentRow[] = [];
  const pattern =
    /^\s+(\S+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+([RWE ]{3})\s+(0x[0-9a-f]+|\d+)\s*$/;
  for (const line of text.split('\n')) {
    const m = pattern.exec(line);
    if (m === null) continue;
    rows.push({
      type: m[1] as string,
      offset: hexNumber(m[2] as string),
      vaddr: hexNumber(m[3] as string),
      paddr: hexNumber(m[4] as string),
      filesz: hexNumber(m[5] as string),
      memsz: hexNumber(m[6] as string),
      flags: m[7] as string,
      align: (m[8] as string).startsWith('0x') ? hexNumber(m[8] as string) : Number(m[8]),
    });
  }
  return rows;
}

export interface SectionRow {
  readonly name: string;
  readonly type: string;
  readonly addr: number;
  readonly offset: number;
  readonly size: number;
}

export async function sectionRows(file: string): Promise<SectionRow[]> {
  const text = (await mustExec(requireTool('readelf'), ['-SW', file])).stdout;
  const rows: SectionRow[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*\[\s*\d+\]\s+(\S*)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s/.exec(line);
    if (m === null || m[2] === 'NULL') continue;
    rows.push({
      name: m[1] as string,
      type: m[2] as string,
      addr: hexNumber(m[3] as string),
      offset: hexNumber(m[4] as string),
      size: hexNumber(m[5] as string),
    });
  }
  return rows;
}

export async function section(file: string, name: string): Promise<SectionRow> {
  const found = (await sectionRows(file)).find((s) => s.name === name);
  if (found === undefined) throw new Error(`${file} has no section ${name}`);
  return found;
}

export interface HeaderFields {
  readonly phoff: number;
  readonly phnum: number;
  readonly type: string;
}

export async function elfHeader(file: string): Promise<HeaderFields> {
  const text = (await mustExec(requireTool('readelf'), ['-hW', file])).stdout;
  const field = (label: string): string => {
    const m = new RegExp(`^\\s*${label}:\\s+(.*)$`, 'm').exec(text);
    if (m === null) throw new Error(`readelf -h ${file}: no "${label}"`);
    return (m[1] as string).trim();
  };
  return {
    phoff: Number(/^(\d+)/.exec(field('Start of program headers'))?.[1]),
    phnum: Number(field('Number of program headers')),
    type: field('Type').split(' ')[0] ?? '',
  };
}

/** The address of a symbol in the static symbol table (readelf -s). */
export async function symbolAddress(file: string, name: string): Promise<number> {
  const text = (await mustExec(requireTool('readelf'), ['-sW', file])).stdout;
  for (const line of text.split('\n')) {
    const cols = line.trim().split(/\s+/);
    if (cols[7] === name && cols[1] !== undefined) return hexNumber(cols[1]);
  }
  throw new Error(`${file} has no symbol ${name}`);
}

/** The file offset of a virtual address, through the PT_LOADs. */
export function offsetOfAddress(rows: readonly SegmentRow[], vaddr: number): number {
  const load = rows.find((r) => r.type === 'LOAD' && vaddr >= r.vaddr && vaddr < r.vaddr + r.filesz);
  if (load === undefined) throw new Error(`address 0x${vaddr.toString(16)} is not in any PT_LOAD`);
  return load.offset + (vaddr - load.vaddr);
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
