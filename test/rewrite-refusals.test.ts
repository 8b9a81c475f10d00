// When the rewriter must not write: noop edits, read-only files, plans it cannot carry out, --output,
// --dry-run, batches with a failing file, and files that change between planning and writing. A file
// that is not to be written keeps its bytes, its mtime and its mode.

import { appendFile, chmod, copyFile, cp, mkdir, readFile, rename, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { editElfFile } from '../src/edit/edit-file.js';
import { CudaPatchelfError } from '../src/errors/cuda-patchelf-error.js';
import { FIXTURE_RUNPATH, GREETING, fixture, requireTool, runOn } from './helpers/fixtures.js';
import { describeRun, fileState, type FileState } from './helpers/rw-build.js';
import { dynamicStrings } from './helpers/readelf.js';
import { stretchHighestLoad32 } from './helpers/rw-elf.js';
import { assertCliBuilt, runCli, stderrLines, type CliResult } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';
import { bytes } from './helpers/byte-strings.js';

/** Long enough that it never fits in the .dynstr of the small fixtures: the plan appends. */
const LONG = '/nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-cuda_compat/compat:/run/opengl-driver/lib:/some/other/long/directory/entry';
/** A time far in the past, so that any write shows in the mtime. */
const OLD_TIME = new Date('2001-02-03T04:05:06Z');

const program = fixture('compiled/x86_64/pie-runpath');
const noRunpath = fixture('compiled/x86_64/pie-no-runpath');
const arm = fixture('compiled/arm/exec-rpath');

const work = useTempDir('rw-refusals');
let counter = 0;

beforeAll(async () => {
  assertCliBuilt();
  requireTool('readelf');
});

/** A copy of the program fixture with its lib/ next to it (so that it runs), mtime set in the past. */
async function freshProgram(from = program): Promise<string> {
  const root = join(work(), `case-${++counter}`);
  await mkdir(join(root, 'bin'), { recursive: true });
  await cp(join(from.path, '..', '..', 'lib'), join(root, 'lib'), { recursive: true });
  const file = join(root, 'bin', 'prog');
  await copyFile(from.path, file);
  await utimes(file, OLD_TIME, OLD_TIME);
  return file;
}

async function cli(args: readonly string[]): Promise<CliResult> {
  return runCli(args, { timeoutMs: 60_000 });
}

interface JsonRecord {
  file: string;
  tier?: string;
  bytesWritten?: number;
  error?: { kind: string; message: string };
}

function records(result: CliResult): JsonRecord[] {
  return JSON.parse(result.stdout) as JsonRecord[];
}

async function expectUntouched(file: string, before: FileState): Promise<void> {
  expect(await fileState(file)).toEqual(before);
}

async function runs(file: string): Promise<void> {
  const result = await runOn('x86_64', file, []);
  expect(result.code, describeRun(result)).toBe(0);
  expect(result.stdout).toBe(`${GREETING}\n`);
}

/** One stderr line, naming the file, without a stack trace. */
function oneErrorLine(result: CliResult, file: string): string {
  const lines = stderrLines(result);
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toContain(file);
  expect(result.stderr).not.toMatch(/^\s+at /m);
  return lines[0] ?? '';
}

describe('noop: an edit that changes nothing writes nothing, not even the mtime', () => {
  it.each([
    { name: 'set-runpath to the current value', args: ['set-runpath', FIXTURE_RUNPATH.program] },
    { name: 'add-runpath --dedupe of a present directory', args: ['add-runpath', '--dedupe', '$ORIGIN/../lib'] },
    { name: 'add-needed of a present library', args: ['add-needed', 'libc.so.6'] },
    { name: 'remove-needed of an absent library', args: ['remove-needed', 'libabsent.so.9'] },
    { name: 'replace-needed of an absent library', args: ['replace-needed', 'libabsent.so.9', 'libother.so.1'] },
    { name: 'remove-runpath of an absent directory', args: ['remove-runpath', '/not/in/the/runpath'] },
  ])('$name', async ({ args }) => {
    const file = await freshProgram();
    const before = await fileState(file);
    const result = await cli([...args, file, '--json']);
    expect(result.code, result.stderr).toBe(0);
    expect(records(result)).toMatchObject([{ file, tier: 'noop', bytesWritten: 0 }]);
    await expectUntouched(file, before);
    const text = await cli([...args, file]);
    expect(text.stdout).toBe(`${file}: already as asked, nothing written\n`);
    await expectUntouched(file, before);
  });

  it('remove-runpath --all on a file without a runpath', async () => {
    const file = await freshProgram(noRunpath);
    const before = await fileState(file);
    const result = await cli(['remove-runpath', '--all', file, '--json']);
    expect(result.code, result.stderr).toBe(0);
    expect(records(result)).toMatchObject([{ tier: 'noop', bytesWritten: 0 }]);
    await expectUntouched(file, before);
  });

  it('the patchelf-compatible mode: --set-rpath to the current value', async () => {
    const file = await freshProgram();
    const before = await fileState(file);
    const result = await cli(['--set-rpath', FIXTURE_RUNPATH.program, file]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('');
    await expectUntouched(file, before);
  });
});

describe('read-only files', () => {
  let file = '';
  beforeEach(async () => {
    file = await freshProgram();
    await chmod(file, 0o444);
    await utimes(file, OLD_TIME, OLD_TIME);
  });

  it('are refused with one line and exit 3, left byte-identical with the same mtime and mode', async () => {
    const before = await fileState(file);
    expect(before.mode).toBe(0o444);
    const result = await cli(['set-runpath', '/opt/new/lib', file]);
    expect(result.code).toBe(3);
    expect(oneErrorLine(result, file)).toMatch(/read-only/);
    await expectUntouched(file, before);
    const json = await cli(['set-runpath', LONG, file, '--json']);
    expect(json.code).toBe(3);
    expect(records(json)[0]?.error?.kind).toBe('io');
    await expectUntouched(file, before);
  });

  it.each([
    { name: 'in place', value: '/opt/new/lib' },
    { name: 'appended', value: `${LONG}:$ORIGIN/../lib` },
  ])('--make-writable edits them ($name) and restores mode 0444', async ({ value }) => {
    const result = await cli(['set-runpath', value, file, '--make-writable']);
    expect(result.code, result.stderr).toBe(0);
    expect(await dynamicStrings(file, 'RUNPATH')).toEqual([value]);
    expect((await fileState(file)).mode).toBe(0o444);
    if (value.includes('$ORIGIN')) {
      // Mode 0444 has no execute bit: run a copy next to it.
      const copy = `${file}.run`;
      await copyFile(file, copy);
      await chmod(copy, 0o755);
      await runs(copy);
    }
  });

  it('need no permission for a noop or a dry run (nothing is written)', async () => {
    const before = await fileState(file);
    const noop = await cli(['set-runpath', FIXTURE_RUNPATH.program, file]);
    expect(noop.code, noop.stderr).toBe(0);
    const dry = await cli(['set-runpath', LONG, file, '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    await expectUntouched(file, before);
  });
});

describe('a plan that cannot be carried out', () => {
  // A 32-bit executable whose memory image reaches the top of the address space: there is no address
  // left for the segment that appended data needs.
  let file = '';
  beforeEach(async () => {
    file = join(work(), `arm-full-${++counter}`);
    await writeFile(file, stretchHighestLoad32(new Uint8Array(await readFile(arm.path)), 0xffffff00), { mode: 0o755 });
    await utimes(file, OLD_TIME, OLD_TIME);
    // The file itself is fine: it reads, and edits that need no new segment are done.
    const printed = await cli(['print', file]);
    expect(printed.code, printed.stderr).toBe(0);
  });

  it('is refused by the CLI: one "unsupported" line, exit 3, the file byte-identical with the same mtime', async () => {
    const before = await fileState(file);
    const result = await cli(['set-runpath', LONG, file]);
    expect(result.code).toBe(3);
    oneErrorLine(result, file);
    await expectUntouched(file, before);
    const json = await cli(['set-runpath', LONG, file, '--json']);
    expect(json.code).toBe(3);
    expect(records(json)).toMatchObject([{ file, error: { kind: 'unsupported' } }]);
    await expectUntouched(file, before);
    // The patchelf-compatible mode fails with patchelf's exit code.
    const compat = await cli(['--set-rpath', LONG, file]);
    expect(compat.code).toBe(1);
    oneErrorLine(compat, file);
    await expectUntouched(file, before);
  });

  it('is refused by the library with a typed error carrying the file', async () => {
    const before = await fileState(file);
    const error = await editElfFile(file, (editor) => editor.setRunpath(bytes(LONG), 'keep')).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CudaPatchelfError);
    expect((error as CudaPatchelfError).kind).toBe('unsupported');
    expect((error as CudaPatchelfError).file).toBe(file);
    await expectUntouched(file, before);
  });

  it('an edit of the same file that fits in place is still done', async () => {
    const result = await cli(['set-runpath', '/x', file, '--json']);
    expect(result.code, result.stderr).toBe(0);
    expect(records(result)[0]?.tier).toBe('in-place');
    expect(await dynamicStrings(file, 'RPATH')).toEqual(['/x']);
  });
});

describe('--output', () => {
  it('`--output FILE` (two arguments) is the subcommand option: the result goes there, the input stays', async () => {
    const input = await freshProgram();
    const output = join(input, '..', 'prog.out');
    const before = await fileState(input);
    const result = await cli(['set-runpath', `${LONG}:$ORIGIN/../lib`, input, '--output', output]);
    expect(result.code, result.stderr).toBe(0);
    await expectUntouched(input, before);
    expect(await dynamicStrings(output, 'RUNPATH')).toEqual([`${LONG}:$ORIGIN/../lib`]);
  });

  it.each([
    { name: 'appended', value: `${LONG}:$ORIGIN/../lib` },
    { name: 'in place', value: '$ORIGIN/../lib' },
  ])('--output=FILE ($name): the output has the edit and runs, the input is byte-identical with the same mtime', async ({ value }) => {
    const input = await freshProgram();
    const output = join(input, '..', 'prog.out');
    const before = await fileState(input);
    const result = await cli(['set-runpath', value, input, `--output=${output}`]);
    expect(result.code, result.stderr).toBe(0);
    await expectUntouched(input, before);
    expect(await dynamicStrings(output, 'RUNPATH')).toEqual([value]);
    expect(await dynamicStrings(input, 'RUNPATH')).toEqual([FIXTURE_RUNPATH.program]);
    await runs(output);
  });

  it('--output of a noop edit is a byte-identical copy', async () => {
    const input = await freshProgram();
    const output = join(input, '..', 'prog.out');
    const before = await fileState(input);
    const result = await cli(['set-runpath', FIXTURE_RUNPATH.program, input, `--output=${output}`]);
    expect(result.code, result.stderr).toBe(0);
    await expectUntouched(input, before);
    expect((await fileState(output)).sha256).toBe(before.sha256);
  });

  it('--output from a read-only input writes the output and leaves the input alone', async () => {
    const input = await freshProgram();
    await chmod(input, 0o444);
    const output = join(input, '..', 'prog.out');
    const before = await fileState(input);
    const result = await cli(['set-runpath', `${LONG}:$ORIGIN/../lib`, input, `--output=${output}`]);
    expect(result.code, result.stderr).toBe(0);
    await expectUntouched(input, before);
    expect(await dynamicStrings(output, 'RUNPATH')).toEqual([`${LONG}:$ORIGIN/../lib`]);
  });

  it('the patchelf-compatible mode: --output FILE', async () => {
    const input = await freshProgram();
    const output = join(input, '..', 'prog.out');
    const before = await fileState(input);
    const result = await cli(['--set-rpath', `${LONG}:$ORIGIN/../lib`, '--output', output, input]);
    expect(result.code, result.stderr).toBe(0);
    await expectUntouched(input, before);
    expect(await dynamicStrings(output, 'RUNPATH')).toEqual([`${LONG}:$ORIGIN/../lib`]);
    await runs(output);
  });
});

describe('--dry-run writes nothing', () => {
  const tiers = new Set<string>();

  it.each([
    { name: 'shorter runpath', args: ['set-runpath', '/opt/x'] },
    { name: 'long runpath', args: ['set-runpath', LONG] },
    { name: 'new DT_NEEDED', args: ['add-needed', 'libcuda-patchelf-dry-run.so.1'] },
    { name: 'remove --all', args: ['remove-runpath', '--all'] },
  ])('$name: reports the tier the edit takes', async ({ args }) => {
    const file = await freshProgram();
    const before = await fileState(file);
    const json = await cli([...args, file, '--dry-run', '--json']);
    expect(json.code, json.stderr).toBe(0);
    const [record] = records(json);
    expect(record).toMatchObject({ file, bytesWritten: 0 });
    const text = await cli([...args, file, '--dry-run']);
    expect(text.code, text.stderr).toBe(0);
    // The line says how the edit would reach the file, in the words of the tier the JSON names.
    const how = { 'in-place': 'would be edited in place', append: 'tables would be copied to the end of the file' }[record?.tier ?? ''];
    expect(how, record?.tier).toBeDefined();
    expect(text.stdout).toMatch(new RegExp(`^${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: .+ \\(dry run: ${how ?? ''}\\)\n$`));
    await expectUntouched(file, before);
    // The same edit done for real takes the tier the dry run announced.
    const real = await cli([...args, file, '--json']);
    expect(real.code, real.stderr).toBe(0);
    expect(records(real)[0]?.tier).toBe(record?.tier);
    tiers.add(record?.tier ?? '');
  });

  it('covered both the in-place and the append tier', () => {
    expect([...tiers].sort()).toEqual(['append', 'in-place']);
  });
});

describe('several files in one call, some failing', () => {
  it('edits the others, reports each failure on one line, exits 3, leaves the failed files untouched', async () => {
    const first = await freshProgram();
    const readOnly = await freshProgram();
    await chmod(readOnly, 0o444);
    const notElf = join(work(), `not-elf-${++counter}`);
    await writeFile(notElf, '#!/bin/sh\necho not an ELF file\n', { mode: 0o755 });
    await utimes(notElf, OLD_TIME, OLD_TIME);
    const last = await freshProgram();
    const untouched = new Map([
      [readOnly, await fileState(readOnly)],
      [notElf, await fileState(notElf)],
    ]);
    const value = `${LONG}:$ORIGIN/../lib`;

    const result = await cli(['set-runpath', value, first, readOnly, notElf, last, '--json']);
    expect(result.code).toBe(3);
    const lines = stderrLines(result);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain(readOnly);
    expect(lines[1]).toContain(notElf);
    expect(records(result).map((r) => [r.file, r.tier ?? r.error?.kind])).toEqual([
      [first, 'append'],
      [readOnly, 'io'],
      [notElf, 'format'],
      [last, 'append'],
    ]);
    for (const [file, state] of untouched) await expectUntouched(file, state);
    for (const file of [first, last]) {
      expect(await dynamicStrings(file, 'RUNPATH')).toEqual([value]);
      await runs(file);
    }
  });
});

describe('a file that changes between planning and writing is left alone', () => {
  async function attempt(file: string, change: () => Promise<void>): Promise<unknown> {
    return editElfFile(file, async (editor) => {
      await change();
      editor.setRunpath(bytes(LONG), 'keep');
    }).then(
      () => null,
      (e: unknown) => e,
    );
  }

  function expectChanged(error: unknown, file: string): void {
    expect(error).toBeInstanceOf(CudaPatchelfError);
    expect((error as CudaPatchelfError).kind).toBe('changed');
    expect((error as CudaPatchelfError).file).toBe(file);
  }

  it('a byte appended', async () => {
    const file = await freshProgram();
    const original = await readFile(file);
    const error = await attempt(file, () => appendFile(file, Uint8Array.of(0x2a)));
    expectChanged(error, file);
    expect(Buffer.compare(await readFile(file), Buffer.concat([original, Uint8Array.of(0x2a)]))).toBe(0);
  });

  it('the mtime touched', async () => {
    const file = await freshProgram();
    const original = await readFile(file);
    const touched = new Date('2011-12-13T14:15:16Z');
    const error = await attempt(file, () => utimes(file, touched, touched));
    expectChanged(error, file);
    expect(Buffer.compare(await readFile(file), original)).toBe(0);
    expect((await fileState(file)).mtimeMs).toBe(touched.getTime());
  });

  it('the file replaced by another one under the same name', async () => {
    const file = await freshProgram();
    const replacement = `${file}.new`;
    await copyFile(file, replacement);
    await utimes(replacement, OLD_TIME, OLD_TIME);
    const replacementState = await fileState(replacement);
    const error = await attempt(file, () => rename(replacement, file));
    expectChanged(error, file);
    await expectUntouched(file, replacementState);
  });
});
