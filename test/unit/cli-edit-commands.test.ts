// The single-file commands run in-process through a fake CliIo on temporary copies of corpus files:
// the editing subcommands (src/cli/edit-commands.ts) and the patchelf-compatible mode, whose command
// line (patchelf-arguments.ts) is also read here as patchelf reads it.

import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isPatchelfInvocation, parsePatchelfArguments, type PatchelfRequest } from '../../src/cli/patchelf-arguments.js';
import { textToByteString, withElfFile } from '../../src/elf/elf.js';
import { CudaPatchelfError } from '../../src/errors/cuda-patchelf-error.js';
import { useTempDir } from '../helpers/use-temp-dir.js';
import { corpus, textFile, treeIn } from './helpers/corpus-tree.js';
import { jsonOf, runInProcess } from './helpers/fake-cli-io.js';
import { type DynamicStrings, dynamicStrings } from './helpers/plan-in-memory.js';

const scratch = useTempDir('unit-cli-edit');

/** Fresh copies of the corpus files `names` (by the name given), in a directory of their own. */
async function copies(names: Record<string, string>): Promise<(name: string) => string> {
  const dir = await treeIn(scratch(), Object.fromEntries(Object.entries(names).map(([name, file]) => [name, corpus(file)])));
  return (name) => join(dir, name);
}

async function factsOf(path: string): Promise<DynamicStrings & { interpreter: string | null }> {
  const strings = await dynamicStrings(new Uint8Array(await readFile(path)));
  return { ...strings, interpreter: await withElfFile(path, async (file) => file.interpreter) };
}

describe('the editing commands', () => {
  it('set, add to and remove from a runpath, keeping the tag the file has; each says what it did and how', async () => {
    const at = await copies({ 'rpath.so': 'x86_64-lib-rpath.so' });
    const file = at('rpath.so');
    const steps: [string[], string][] = [
      [['set-runpath', '/x:/y'], "runpath set to '/x:/y' (edited in place, 17 bytes written)"],
      [['add-runpath', '/w'], "'/w' prepended to the runpath (edited in place"],
      [['add-runpath', '--append', '/z'], "'/z' appended to the runpath ("],
      [['add-runpath', '--dedupe', '/y:/v'], "runpath set to '/y:/v:/w:/x:/z' ("],
      [['remove-runpath', '/x:/v'], "'/v:/x' removed from the runpath ("],
    ];
    for (const [argv, line] of steps) {
      const run = await runInProcess([...argv, file]);
      expect(run).toMatchObject({ code: 0, err: [] });
      expect(run.out).toEqual([expect.stringContaining(`${file}: ${line}`)]);
    }
    expect(await factsOf(file)).toMatchObject({ runpath: null, rpath: '/y:/w:/z' });
    expect((await runInProcess(['remove-runpath', '--all', file])).out).toEqual([expect.stringMatching(/: runpath removed \(/)]);
    expect(await factsOf(file)).toMatchObject({ runpath: null, rpath: null });
  });

  it('--force-rpath turns DT_RUNPATH into DT_RPATH, and says so', async () => {
    const at = await copies({ 'lld.so': 'x86_64-lib-lld.so' });
    const run = await runInProcess(['set-runpath', '--force-rpath', '/q', at('lld.so')]);
    expect(run.out).toEqual([`${at('lld.so')}: DT_RUNPATH turned into DT_RPATH; runpath set to '/q' (edited in place, 16 bytes written)`]);
    expect(await factsOf(at('lld.so'))).toMatchObject({ runpath: null, rpath: '/q' });
  });

  it('add, remove and rename needed libraries', async () => {
    const at = await copies({ 'plain.so': 'x86_64-lib-plain.so' });
    const file = at('plain.so');
    for (const argv of [
      ['add-needed', 'libextra.so.1'],
      ['remove-needed', 'libm.so.6'],
      ['replace-needed', 'libc.so.6', 'libc-alt.so.6'],
    ])
      expect((await runInProcess([...argv, file])).code).toBe(0);
    expect((await factsOf(file)).needed).toEqual(['libextra.so.1', 'libc-alt.so.6']);
  });

  it("set a program's interpreter; a library has none to set, and the others are still done", async () => {
    const at = await copies({ app: 'x86_64-pie-runpath.elf', 'lib.so': 'x86_64-lib-plain.so' });
    const run = await runInProcess(['set-interpreter', '/lib/ld-other.so.2', at('lib.so'), at('app')]);
    expect(run.code).toBe(3);
    expect(run.out).toEqual([`${at('app')}: interpreter set to '/lib/ld-other.so.2' (edited in place, 28 bytes written)`]);
    expect(run.err).toEqual([
      `cuda-patchelf: ${at('lib.so')}: no interpreter (PT_INTERP) to set: the file is a library or statically linked`,
    ]);
    expect((await factsOf(at('app'))).interpreter).toBe('/lib/ld-other.so.2');
  });

  it('--dry-run writes nothing; --output leaves the input alone; --json reports each file, a failure included', async () => {
    const at = await copies({ 'plain.so': 'x86_64-lib-plain.so', 'rpath.so': 'x86_64-lib-rpath.so' });
    const file = at('plain.so');
    const dry = await runInProcess(['set-runpath', '--dry-run', '/dry', file]);
    expect(dry.out).toEqual([`${file}: runpath set to '/dry' (dry run: tables would be copied to the end of the file)`]);
    expect(await readFile(file)).toEqual(Buffer.from(corpus('x86_64-lib-plain.so')));
    const output = join(scratch(), 'output.so');
    expect((await runInProcess(['set-runpath', '--output', output, '/out', file])).code).toBe(0);
    expect(await readFile(file)).toEqual(Buffer.from(corpus('x86_64-lib-plain.so')));
    expect((await factsOf(output)).runpath).toBe('/out');
    const notElf = join(scratch(), 'not-elf.txt');
    await writeFile(notElf, textFile('text\n'));
    const json = await runInProcess(['set-runpath', '--json', '/j', at('rpath.so'), notElf]);
    expect(json.code).toBe(3);
    const size = corpus('x86_64-lib-rpath.so').length;
    expect(jsonOf(json)).toEqual([
      {
        file: at('rpath.so'),
        tier: 'in-place',
        changes: ["runpath set to '/j'"],
        bytesWritten: 17,
        plannedBytes: 17,
        sizeBefore: size,
        sizeAfter: size,
      },
      { file: notElf, error: { kind: 'format', message: 'not an ELF file (no \\x7fELF magic)', offset: 0 } },
    ]);
  });

  it.each([
    [['set-runpath', '--output', 'out.so', '/o', 'a.so', 'b.so'], '--output takes exactly one input file'],
    [['set-runpath', '--output', '', '/o', 'a.so'], '--output needs a file name'],
    [['remove-runpath', 'a.so'], 'remove-runpath needs DIRS and at least one file (or --all and files)'],
    [['set-interpreter', '', 'a.so'], 'set-interpreter needs a path, and an empty one was given (an unset variable?)'],
    [['add-needed', 'libx.so', ''], 'an empty path was given (an unset variable?); name the files to edit'],
  ])('%j is a usage error', async (argv, line) => {
    expect(await runInProcess(argv)).toEqual({ code: 2, out: [], err: [`cuda-patchelf: ${line}`], raw: [] });
  });
});

describe('what an edit refuses or says', () => {
  // An empty DIRS (an unset variable: `add-runpath "$LIBDIR" lib.so`) would add an empty entry, which the
  // loader takes as the working directory (src/loader/search-path.ts): a usage error, and nothing written.
  it.each([
    ['', 'add-runpath: DIRS is empty, which the loader takes as the working directory'],
    ['/a::/b', 'add-runpath: "/a::/b" has an empty entry, which the loader takes as the working directory'],
  ])('add-runpath %j is a usage error', async (dirs, line) => {
    const at = await copies({ 'rpath.so': 'x86_64-lib-rpath.so' });
    const before = await factsOf(at('rpath.so'));
    expect(await runInProcess(['add-runpath', dirs, at('rpath.so')])).toEqual({
      code: 2,
      out: [],
      err: [`cuda-patchelf: ${line}`],
      raw: [],
    });
    expect(await factsOf(at('rpath.so'))).toEqual(before);
  });

  // A rename to a name the file already needs: [libm, libc] becomes [libc, libc], told as the rename it is.
  it('replace-needed says it replaced the name, also when the new name is needed already', async () => {
    const at = await copies({ 'plain.so': 'x86_64-lib-plain.so' });
    const run = await runInProcess(['replace-needed', 'libm.so.6', 'libc.so.6', at('plain.so')]);
    expect((await factsOf(at('plain.so'))).needed).toEqual(['libc.so.6', 'libc.so.6']);
    expect(run.out).toEqual([expect.stringContaining(`${at('plain.so')}: 'libm.so.6' replaced by 'libc.so.6' in the needed libraries (`)]);
  });
});

describe('the patchelf-compatible mode', () => {
  it("prints in patchelf's order and edits silently; --debug says what changed on stderr", async () => {
    const at = await copies({ 'plain.so': 'x86_64-lib-plain.so', 'lld.so': 'x86_64-lib-lld.so' });
    const printed = await runInProcess(['--print-needed', '--print-rpath', '--print-soname', at('plain.so'), at('lld.so')]);
    expect(printed).toEqual({
      code: 0,
      out: ['libplain.so.1', '', 'libm.so.6', 'libc.so.6', 'liblld.so.1', '/opt/corpus/lld', 'libc.so.6'],
      err: [],
      raw: [],
    });
    expect(await runInProcess(['--set-rpath', '/p', at('plain.so')])).toEqual({ code: 0, out: [], err: [], raw: [] });
    const debug = await runInProcess(['--add-rpath', '/q', '--debug', at('plain.so')]);
    expect(debug.err).toEqual([
      expect.stringMatching(new RegExp(`^${at('plain.so')}: '/q' appended to the runpath \\(.*, \\d+ bytes written\\)$`)),
    ]);
    expect((await factsOf(at('plain.so'))).runpath).toBe('/p:/q');
  });

  it('exits 1 on any failure, a wrong command line included', async () => {
    const at = await copies({ 'lib.so': 'x86_64-lib-plain.so' });
    const cases: [string[], string][] = [
      [['--print-interpreter', at('lib.so')], `${at('lib.so')}: no interpreter (PT_INTERP): the file is a library or statically linked`],
      [['--set-rpath', '/a', '--add-rpath', '/b', at('lib.so')], '--set-rpath and --add-rpath cannot be used together'],
      [
        ['--page-size', '4096', at('lib.so')],
        '--page-size is a patchelf flag the patchelf-compatible mode does not take (see cuda-patchelf --help)',
      ],
      [['--bogus', at('lib.so')], "unknown option '--bogus'"],
      [['--set-rpath'], '--set-rpath needs RUNPATH'],
    ];
    for (const [argv, line] of cases)
      expect(await runInProcess(argv)).toEqual({ code: 1, out: [], err: [`cuda-patchelf: ${line}`], raw: [] });
  });
});

describe('patchelf arguments', () => {
  const parsed = (argv: readonly string[]): Promise<PatchelfRequest> => parsePatchelfArguments(argv);
  const refused = async (argv: readonly string[]): Promise<string> => {
    const error = await parsed(argv).then(
      () => null,
      (thrown: unknown) => thrown,
    );
    if (!(error instanceof CudaPatchelfError)) throw new Error(`${argv.join(' ')}: not refused`);
    return `${error.kind}: ${error.describe()}`;
  };

  it('reads every flag with its values, in any order around the files', async () => {
    const request = await parsed([
      'a.so',
      '--shrink-rpath',
      '--allowed-rpath-prefixes',
      '/nix/store:/opt',
      '--force-rpath',
      '--replace-needed',
      'libx.so',
      'liby.so',
      '--add-needed',
      'liba.so',
      '--add-needed',
      'libb.so',
      '--remove-needed',
      'libc.so',
      '--interpreter',
      '/lib/ld.so',
      '--make-writable',
      '-',
    ]);
    expect(request).toEqual({
      files: ['a.so', '-'],
      removeRpath: false,
      shrinkRpath: true,
      allowedPrefixes: ['/nix/store', '/opt'],
      forceRpath: true,
      printRpath: false,
      printNeeded: false,
      printSoname: false,
      printInterpreter: false,
      addNeeded: ['liba.so', 'libb.so'],
      removeNeeded: ['libc.so'],
      replaceNeeded: [['libx.so', 'liby.so']],
      debug: false,
      makeWritable: true,
      setInterpreter: '/lib/ld.so',
    });
  });

  it('takes @FILE as the contents of FILE, byte for byte, for the flags patchelf reads it for', async () => {
    const value = join(scratch(), 'value');
    await writeFile(value, Buffer.from('/from/file/\xe9\n', 'latin1'));
    const request = await parsed(['--set-rpath', `@${value}`, '--replace-needed', `@${value}`, 'liby.so', 'a.so']);
    expect(request.setRpath).toBe(Buffer.from('/from/file/\xe9\n', 'latin1').toString('latin1'));
    // --replace-needed takes its values as they are.
    expect(request.replaceNeeded).toEqual([[`@${value}`, 'liby.so']]);
    expect((await parsed(['--set-rpath', '/caf\u00e9', 'a.so'])).setRpath).toBe(textToByteString('/caf\u00e9'));
  });

  it('refuses what patchelf would, and a value it would cut at a NUL byte', async () => {
    const nul = join(scratch(), 'nul');
    await writeFile(nul, Buffer.from('/a\0/b'));
    expect(await refused(['--set-rpath', `@${nul}`, 'a.so'])).toBe(
      `usage: --set-rpath @${nul}: the file holds a NUL byte, which a runpath or a file name cannot`,
    );
    expect(await refused(['--add-needed', '@', 'a.so'])).toBe('usage: --add-needed @: no file name after @');
    expect(await refused(['--set-rpath', `@${join(scratch(), 'missing')}`, 'a.so'])).toMatch(/^io: .*\/missing: /);
    expect(await refused(['--replace-needed', 'libx.so'])).toBe('usage: --replace-needed needs LIBRARY NEW_LIBRARY');
    expect(await refused(['--print-rpath'])).toBe('usage: no input file');
    expect(await refused(['--print-rpath', ''])).toBe('usage: an empty path was given (an unset variable?); name the files to edit');
    expect(await refused(['--output', '', 'a.so'])).toBe('usage: --output needs a file name');
    expect(await refused(['--output', 'o.so', 'a.so', 'b.so'])).toBe('usage: --output takes exactly one input file');
  });

  it('tells a patchelf command line from a command of its own', () => {
    const patchelf = [['--set-rpath', '/x', 'a.so'], ['a.so', '--print-rpath'], ['--json'], ['--page-size', '4096', 'a.so'], ['-x']];
    const own = [['print', 'a.so'], ['--help'], ['-h'], ['-V'], ['--version'], ['apply', 'dir'], []];
    expect(patchelf.map((argv) => isPatchelfInvocation(argv))).toEqual(patchelf.map(() => true));
    expect(own.map((argv) => isPatchelfInvocation(argv))).toEqual(own.map(() => false));
  });
});
