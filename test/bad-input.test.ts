// Malformed and unreadable inputs: `print` reports each in one stderr line naming the file, what is wrong
// and where, exits 3, never hangs or shows a stack trace, keeps printing the good files, and writes nothing.

import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileByteSource } from '../src/elf/byte-source.js';
import { readElfImage } from '../src/elf/elf-image.js';
import { readSectionHeaders } from '../src/elf/section-headers.js';
import { CudaPatchelfError } from '../src/errors/cuda-patchelf-error.js';
import { fixtures, requireTool, type Fixture } from './helpers/fixtures.js';
import { fieldOffsets, malformedCorpus, rawLayout, writeUnsigned, type Expectation } from './helpers/malformed.js';
import { assertCliBuilt, runCli, stderrLines, type CliResult } from './helpers/run-cli.js';
import { mustExec } from './helpers/exec.js';
import { makeTempDir } from './helpers/temp-dir.js';

/** Node starts in well under a second; anything near this bound is a hang, not a slow machine. */
const TIME_BOUND_MS = 10_000;

interface JsonError {
  file: string;
  error?: { kind: string; message: string; offset: number | null };
  class?: string;
}

const all = fixtures();

function pick(description: string, predicate: (f: Fixture) => boolean): Fixture {
  const found = all.filter(predicate).sort((a, b) => a.id.localeCompare(b.id))[0];
  if (found === undefined) throw new Error(`no fixture in the manifest is ${description}`);
  return found;
}

// An executable has every structure the corpus cuts (PT_INTERP, DT_NEEDED, .dynstr); one per class and
// byte order, so the field offsets of each layout are exercised.
const program = (arch: string) => (f: Fixture) =>
  f.origin === 'compiled' &&
  f.arch === arch &&
  f.kind === 'pie' &&
  f.linker === 'bfd' &&
  f.tags.includes('runpath') &&
  !f.tags.includes('cxx-throw');
const bases = [
  pick('a compiled x86_64 PIE with a runpath', program('x86_64')),
  pick('a compiled 32-bit ARM PIE with a runpath', program('arm')),
  pick('a compiled big-endian ppc64 PIE with a runpath', program('ppc64')),
];
const primary = bases[0];
if (primary === undefined) throw new Error('no base fixture');

const corpora = await Promise.all(bases.map(async (base) => ({ base, cases: malformedCorpus(new Uint8Array(await readFile(base.path))) })));

let dir = '';
const written: string[] = [];
const fingerprints = new Map<string, { sha: string; mtimeMs: number }>();

async function fingerprint(path: string): Promise<{ sha: string; mtimeMs: number }> {
  const bytes = await readFile(path);
  return { sha: createHash('sha256').update(bytes).digest('hex'), mtimeMs: (await stat(path)).mtimeMs };
}

function pathOf(base: string, name: string): string {
  return join(dir, `${base.replaceAll('/', '_')}--${name}`);
}

beforeAll(async () => {
  assertCliBuilt();
  dir = await makeTempDir('bad-input');
  for (const { base, cases } of corpora) {
    for (const testCase of cases) {
      const path = pathOf(base.id, testCase.name);
      await writeFile(path, testCase.bytes);
      written.push(path);
    }
  }
  for (const path of [...written, ...bases.map((b) => b.path)]) fingerprints.set(path, await fingerprint(path));
});

afterAll(async () => {
  if (dir !== '') await rm(dir, { recursive: true, force: true });
});

const hex = (value: number | bigint): string => `0x${value.toString(16)}`;

type Check = typeof expect.soft;

/** The one stderr line for `file`: names the file, says what is wrong, and where when a structure is bad. */
function checkLine(line: string | undefined, file: string, expectation: Expectation, check: Check = expect): void {
  const prefix = `cuda-patchelf: ${file}: `;
  check(line?.startsWith(prefix), `${line} should start with ${prefix}`).toBe(true);
  check(line).not.toMatch(/internal error|\bat .*:\d+:\d+|Error:/);
  const message = (line ?? '').slice(prefix.length);
  check(message).toMatch(expectation.message);
  if (expectation.offset === 'optional') check(message).toMatch(/^[^\n]+$/);
  else if (expectation.offset === 'none') check(message).not.toMatch(/at offset/);
  else if (expectation.offset === 'any') check(message).toMatch(/ \(at offset 0x[0-9a-f]+\)$/);
  else
    check(message.endsWith(` (at offset ${hex(expectation.offset)})`), `${message} should name offset ${hex(expectation.offset)}`).toBe(
      true,
    );
}

function checkCleanRun(result: CliResult): void {
  expect(result.signal, 'killed at the time bound').toBeNull();
  expect(result.ms).toBeLessThan(TIME_BOUND_MS);
}

describe(`malformed variants of ${primary.id}, one print each`, () => {
  const cases = corpora[0]?.cases ?? [];

  it('the corpus has every structure boundary and bad field', () => {
    const names = cases.map((c) => c.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'empty',
        'three-bytes',
        'text-file',
        'truncated-after-ident',
        'truncated-inside-elf-header',
        'truncated-after-elf-header',
        'truncated-inside-pht',
        'truncated-after-pht',
        'truncated-inside-dynamic-array',
        'truncated-inside-dynstr',
        'truncated-inside-interpreter',
        'e_phoff-past-end',
        'e_phoff-2^63',
        'e_phnum-0xfffe',
        'e_phentsize-0',
        'e_phentsize-0xffff',
        'e_phnum-pn_xnum-e_shoff-past-end',
        'e_phnum-pn_xnum-loops-to-pn_xnum',
        'dt_strtab-unmapped',
        'pt_load-chain-above-2^53',
        'dynstr-without-nul',
        'dynamic-without-dt_null',
        'interpreter-without-nul',
        'pt_dynamic-over-elf-header',
      ]),
    );
  });

  it.each(cases.map((c) => ({ name: c.name, c })))('$name', async ({ c }) => {
    const file = pathOf(primary.id, c.name);
    const result = await runCli(['print', '--json', file], { timeoutMs: TIME_BOUND_MS + 5_000 });
    checkCleanRun(result);
    const records = JSON.parse(result.stdout) as JsonError[];
    expect(records).toHaveLength(1);
    if (c.expect === null) {
      // Overlapping structures: accepted or refused, but cleanly either way.
      if (result.code === 0) {
        expect(result.stderr).toBe('');
        expect(records[0]?.class).toMatch(/^ELF(32|64)$/);
      } else {
        expect(result.code).toBe(3);
        expect(stderrLines(result)).toHaveLength(1);
        checkLine(stderrLines(result)[0], file, { message: /./, offset: 'any' });
      }
      return;
    }
    expect(result.code).toBe(3);
    const lines = stderrLines(result);
    expect(lines, result.stderr).toHaveLength(1);
    checkLine(lines[0], file, c.expect);
    expect(records[0]?.error?.kind).toBe('format');
  });
});

describe('malformed variants of every class and byte order, in one multi-file print per base', () => {
  it.each(corpora.map(({ base, cases }) => ({ id: base.id, base, cases })))('$id', async ({ base, cases }) => {
    const bad = cases.map((c) => ({ c, file: pathOf(base.id, c.name) }));
    const good = all
      .filter((f) => f.origin === 'compiled')
      .slice(0, 2)
      .map((f) => f.path);
    expect(good.length).toBeGreaterThan(0);
    const args = [base.path, ...bad.map((b) => b.file), ...good];
    const result = await runCli(['print', '--json', ...args], { timeoutMs: TIME_BOUND_MS });
    expect(result.signal).toBeNull();
    expect(result.code).toBe(3);
    const records = JSON.parse(result.stdout) as JsonError[];
    expect(records.map((r) => r.file)).toEqual(args);
    // The good files are still printed, before and after the bad ones.
    for (const path of [base.path, ...good]) {
      const record = records.find((r) => r.file === path);
      expect(record?.error).toBeUndefined();
      expect(record?.class).toMatch(/^ELF(32|64)$/);
    }
    const lines = stderrLines(result);
    const failed = records.filter((r) => r.error !== undefined).map((r) => r.file);
    expect(lines).toHaveLength(failed.length);
    for (const { c, file } of bad) {
      const mine = lines.filter((line) => line.startsWith(`cuda-patchelf: ${file}: `));
      const record = records.find((r) => r.file === file);
      if (c.expect === null) {
        expect(mine).toHaveLength(record?.error === undefined ? 0 : 1);
        continue;
      }
      // Soft: one run reports every case of this base that is wrong, not only the first.
      expect.soft(mine, `${c.name}: ${result.stderr}`).toHaveLength(1);
      checkLine(mine[0], file, c.expect, expect.soft);
      expect.soft(record?.error?.kind, c.name).toBe('format');
      if (typeof c.expect.offset === 'number') expect.soft(record?.error?.offset, c.name).toBe(c.expect.offset);
    }
  });
});

describe('files that cannot be read at all', () => {
  const io = (message: RegExp): Expectation => ({ message, offset: 'none' });

  async function expectIoFailure(file: string, expectation: Expectation, wrapper?: readonly string[]): Promise<void> {
    const result = await runCli(['print', '--json', file], {
      timeoutMs: TIME_BOUND_MS + 5_000,
      ...(wrapper === undefined ? {} : { wrapper }),
    });
    checkCleanRun(result);
    expect(result.code, result.stderr).toBe(3);
    const lines = stderrLines(result);
    expect(lines, result.stderr).toHaveLength(1);
    checkLine(lines[0], file, expectation);
    expect((JSON.parse(result.stdout) as JsonError[])[0]?.error?.kind).toBe('io');
  }

  it('a directory', async () => {
    const path = join(dir, 'a-directory');
    await mkdir(path);
    await expectIoFailure(path, io(/not a regular file \(a directory\)/));
  });

  it('a FIFO with no writer, without blocking', async () => {
    requireTool('mkfifo');
    const path = join(dir, 'a-fifo');
    await mustExec('mkfifo', [path]);
    await expectIoFailure(path, io(/not a regular file \(a FIFO\)/));
  });

  it('a missing path', async () => {
    await expectIoFailure(join(dir, 'does-not-exist'), io(/cannot open: no such file/));
  });

  it('a file without read permission, for a user that is not root', async () => {
    // Root reads any file whatever its mode, so this runs the CLI as nobody (uid/gid 65534).
    requireTool('setpriv');
    const nobody = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'];
    const place = join(dir, 'permissions');
    await mkdir(place);
    await chmod(dir, 0o755);
    await chmod(place, 0o755);
    const readable = join(place, 'readable');
    const unreadable = join(place, 'unreadable');
    await copyFile(primary.path, readable);
    await copyFile(primary.path, unreadable);
    await chmod(readable, 0o644);
    await chmod(unreadable, 0o000);
    // The same command on a readable copy succeeds: what fails below is the permission, nothing else.
    const control = await runCli(['print', '--json', readable], { wrapper: nobody, timeoutMs: TIME_BOUND_MS + 5_000 });
    expect(control.stderr).toBe('');
    expect(control.code).toBe(0);
    await expectIoFailure(unreadable, io(/cannot open: permission denied/), nobody);
  });
});

describe('section headers are read only on request', () => {
  it('print accepts e_shoff past the end; readSectionHeaders refuses it with the offset', async () => {
    const bytes = new Uint8Array(await readFile(primary.path));
    const layout = rawLayout(bytes);
    const f = fieldOffsets(layout.elfClass);
    const past = bytes.length + 64;
    writeUnsigned(bytes, f.e_shoff, f.word as 4 | 8, layout.little, past);
    const file = join(dir, 'e_shoff-past-end');
    await writeFile(file, bytes);
    fingerprints.set(file, await fingerprint(file));

    const result = await runCli(['print', '--json', file]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);

    const source = FileByteSource.open(file);
    try {
      const image = await readElfImage(source);
      const error = await readSectionHeaders(image).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(CudaPatchelfError);
      expect(error).toMatchObject({ kind: 'format', offset: past });
      expect((error as CudaPatchelfError).message).toMatch(/section header 0.*runs past the end of the file/);
    } finally {
      source.close();
    }
  });
});

describe('print writes nothing', () => {
  it('every input is byte-identical, with the same mtime, after all the runs above', async () => {
    expect(fingerprints.size).toBeGreaterThan(written.length);
    for (const [path, before] of fingerprints) {
      expect(await fingerprint(path), path).toEqual(before);
    }
  });
});
