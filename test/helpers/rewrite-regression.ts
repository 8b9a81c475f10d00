// What the rewrite regression tests share (test/rewrite-*.test.ts, one file for each patchelf bug they
// reproduce, as patchelf's tests/ has): a directory of inputs built for the test, the built CLI that
// must succeed on them, the programs run on their architecture (natively on x86_64, under qemu-aarch64
// on aarch64), programs linked with .rodata moved up against the program header table, and the checks
// that follow a long runpath written into such an input.

import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, expect } from 'vitest';
import type { BuildArch } from './arch.js';
import { programVars, requireTool, runOn } from './fixtures.js';
import { dynamicStrings, loadSegments, programHeaders, segmentOfType, type SegmentRow } from './readelf.js';
import { assertCliBuilt, runCli, type CliResult } from './run-cli.js';
import { compile, defaultLinkerScript, describeRun, loadProblems } from './rw-build.js';
import { useTempDir } from './use-temp-dir.js';

/** Longer than any .dynstr slack of these small inputs: the table must be copied or grown. */
export const LONG_RUNPATH = [
  '/nix/store/0123456789abcdfghijklmnpqrsvwxyz-cuda_compat-12.2/compat',
  '/run/opengl-driver/lib',
  '$ORIGIN/../lib/with/a/long/tail/so/that/it/never/fits/in/place',
].join(':');

/**
 * For a test file: the built CLI and the compilers, linker and qemu checked before its tests, a
 * directory made for them and removed after. Returns what makes (and names) a directory under it.
 */
export function useRegressionDirs(label: string): (name: string) => Promise<string> {
  const work = useTempDir(label);
  beforeAll(() => {
    assertCliBuilt();
    for (const tool of ['readelf', 'gcc', 'aarch64-linux-gnu-gcc', 'ld.lld', 'qemu-aarch64']) requireTool(tool);
  });
  return async (name) => {
    const path = join(work(), name);
    await mkdir(path, { recursive: true });
    return path;
  };
}

/** The built CLI, which must exit 0. */
export async function cliOk(args: readonly string[]): Promise<CliResult> {
  const result = await runCli(args, { timeoutMs: 60_000 });
  expect(result.code, `cuda-patchelf ${args.join(' ')}\n${result.stderr}`).toBe(0);
  return result;
}

/** The tier an edit of one file took (its --json record), the CLI exiting 0. */
export async function tierOf(args: readonly string[]): Promise<string> {
  const result = await cliOk([...args, '--json']);
  const records = JSON.parse(result.stdout) as { tier?: string }[];
  return records[0]?.tier ?? 'none';
}

/** Runs a program of the architecture, which must exit 0; returns what it printed. */
export async function runOk(
  arch: BuildArch,
  file: string,
  options: { readonly libraryPath?: string; readonly env?: Record<string, string> } = {},
): Promise<string> {
  const result = await runOn(arch, file, [], programVars(options.libraryPath, options.env));
  expect(result.code, `${file}\n${describeRun(result)}`).toBe(0);
  return result.stdout;
}

/** Where .rodata goes in a default linker script: after (or before) the first line `anchor` matches, behind `sections`. */
export interface RodataPlacement {
  readonly anchor: RegExp;
  readonly after: boolean;
  /** Output sections put just before .rodata. */
  readonly sections: readonly string[];
}

/**
 * `DIR/prog`, a program that prints `message` from .rodata, linked with the default script of `flags`
 * with .rodata moved as `placement` says (written to DIR/SCRIPT), and `linkFlags` besides.
 */
export async function programWithRodataMoved(
  arch: BuildArch,
  dir: string,
  options: {
    readonly script: string;
    readonly placement: RodataPlacement;
    readonly message: string;
    readonly flags: readonly string[];
    readonly linkFlags: readonly string[];
  },
): Promise<string> {
  const script = (await defaultLinkerScript(arch, dir, options.flags)).split('\n');
  const anchor = script.findIndex((line) => options.placement.anchor.test(line));
  expect(anchor).toBeGreaterThan(0);
  // .rodata follows the anchor in the default script: taking it out leaves the anchor's index as it is.
  const edited = script.filter((line) => !/^\s*\.rodata\s+:/.test(line));
  edited.splice(
    options.placement.after ? anchor + 1 : anchor,
    0,
    ...options.placement.sections,
    '  .rodata : { *(.rodata .rodata.* .gnu.linkonce.r.*) }',
  );
  await writeFile(join(dir, options.script), edited.join('\n'));
  const source = `#include <stdio.h>\nstatic const char message[] = "${options.message}";\nint main(void) { puts(message); return 0; }\n`;
  return compile(arch, dir, 'prog', { 'prog.c': source }, [...options.flags, ...options.linkFlags, `-Wl,-T,${options.script}`]);
}

/**
 * `set-runpath LONG_RUNPATH` on an executable whose table cannot grow where it is. Refusing is allowed
 * (docs/design.md's ELF facts: keep an executable's table where it is, or prove the move): exit 3, an
 * `unsupported` record and the file as it was. Writing anything else is not.
 */
export async function setLongRunpathOrRefuse(program: string): Promise<'written' | 'refused'> {
  const original = await readFile(program);
  const result = await runCli(['set-runpath', LONG_RUNPATH, program, '--json'], { timeoutMs: 60_000 });
  if (result.code === 0) return 'written';
  expect(result.code, result.stderr).toBe(3);
  expect((JSON.parse(result.stdout) as { error?: { kind: string } }[])[0]?.error?.kind).toBe('unsupported');
  expect(Buffer.compare(await readFile(program), original)).toBe(0);
  return 'refused';
}

/**
 * Linux before 5.18 and qemu-user compute AT_PHDR as (lowest PT_LOAD p_vaddr - p_offset) + e_phoff:
 * a table that moved must be at that address, as PT_PHDR says.
 */
export function expectTableWhereLoadersLook(rows: readonly SegmentRow[], phoff: number): void {
  const lowest = loadSegments(rows).reduce((low, l) => (l.vaddr < low.vaddr ? l : low));
  expect(lowest.vaddr - lowest.offset + phoff).toBe(segmentOfType(rows, 'PHDR').vaddr);
}

/** After `set-runpath LONG_RUNPATH`: well-formed PT_LOADs, the runpath readelf shows, and the program prints `output`. */
export async function expectLongRunpathAndRun(arch: BuildArch, program: string, output: string): Promise<void> {
  expect(loadProblems(await programHeaders(program))).toEqual([]);
  expect(await dynamicStrings(program, 'RUNPATH')).toEqual([LONG_RUNPATH]);
  expect(await runOk(arch, program)).toBe(output);
}
