// Debug-info files, as Nixpkgs' separateDebugInfo writes them (`objcopy --only-keep-debug` under
// $debug/lib/debug/.build-id/xx/yyyy.debug) and as `eu-strip -f` does: program headers with a
// PT_DYNAMIC, but no dynamic array in the file. apply, check and plan skip them as `debug-info` and
// write nothing; print says what they are; the single-file editing commands refuse them untouched; the
// patchelf-compatible mode does what patchelf does with them.

import { access, copyFile, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { DEBUG_INFO_VARIANTS, debugInfoTree, requireTool, type DebugInfoTree } from './helpers/fixtures.js';
import { execTool } from './helpers/exec.js';
import { assertCliBuilt, runCli, stderrLines } from './helpers/run-cli.js';
import { parseCheck, parsePlan, parseReport, parseSummaryLine } from './helpers/tree-report.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { contentDifferences, copyTree, snapshotTree } from './helpers/tree-tools.js';
import { effectiveRunpath, readDynamic, dynamicSegmentOffset } from './helpers/readelf.js';

const REFUSAL = 'a debug-info file (objcopy --only-keep-debug): it has no dynamic section to edit';
const DRIVER_LIB = '/run/opengl-driver/lib';

const trees = new Map<string, DebugInfoTree>(DEBUG_INFO_VARIANTS.map((variant) => [variant, debugInfoTree(variant)]));
const tree = (variant: string): DebugInfoTree => {
  const found = trees.get(variant);
  if (found === undefined) throw new Error(`no debug-info fixtures for ${variant}`);
  return found;
};
const allDebugFiles = [...trees.values()].flatMap((t) => t.files);

interface PrintRecord {
  readonly file: string;
  readonly debugInfo: boolean;
  readonly skipReason: string | null;
  readonly interpreter: string | null;
  readonly needed: readonly string[];
  readonly runpath: string | null;
}

beforeAll(() => {
  assertCliBuilt();
  requireTool('readelf');
  requireTool('patchelf');
});

/** Copies of every debug file into a new directory, in the order of allDebugFiles. */
async function copiesOfDebugFiles(label: string): Promise<string[]> {
  const work = await makeTempDir(label);
  return Promise.all(
    allDebugFiles.map(async (f, i) => {
      const copy = join(work, `${String(i)}.debug`);
      await copyFile(f.path, copy);
      return copy;
    }),
  );
}

/** Each copy still holds the bytes of the debug file it was copied from. */
async function expectUntouched(copies: readonly string[]): Promise<void> {
  for (const [i, copy] of copies.entries())
    expect(Buffer.compare(await readFile(copy), await readFile(allDebugFiles[i]?.path ?? '')), copy).toBe(0);
}

describe('the debug files', () => {
  it('cover objcopy and eu-strip outputs of libraries and programs of every class and byte order', () => {
    for (const variant of DEBUG_INFO_VARIANTS) {
      const files = tree(variant).files;
      expect(files.filter((f) => f.tool === 'objcopy').map((f) => relative(tree(variant).root, f.source))).toEqual([
        'out/lib/libgreet.so.1',
        'out/lib/libuser.so',
        'out/bin/prog',
        'out/bin/prog-exec',
      ]);
      expect(files.filter((f) => f.tool === 'eu-strip')).toHaveLength(1);
      for (const f of files.filter((file) => file.tool === 'objcopy'))
        expect(relative(tree(variant).root, f.path)).toMatch(/^debug\/lib\/debug\/\.build-id\/[0-9a-f]{2}\/[0-9a-f]{38}\.debug$/);
    }
  });

  it('keep a PT_DYNAMIC that readelf finds no dynamic section behind', async () => {
    for (const file of allDebugFiles) {
      expect(await dynamicSegmentOffset(file.path), file.path).not.toBeNull();
      expect(await readDynamic(file.path), file.path).toBeNull();
    }
  });
});

describe('print', () => {
  it('--json: every debug file is debugInfo, skipped as debug-info; the file it came from is neither', async () => {
    const paths = allDebugFiles.flatMap((f) => [f.path, f.source]);
    const result = await runCli(['print', '--json', ...paths]);
    expect(result.code, result.stderr).toBe(0);
    const records = new Map((JSON.parse(result.stdout) as PrintRecord[]).map((r) => [r.file, r]));
    for (const file of allDebugFiles) {
      expect(records.get(file.path), file.path).toMatchObject({
        debugInfo: true,
        skipReason: 'debug-info',
        interpreter: null,
        needed: [],
        runpath: null,
      });
      expect(records.get(file.source), file.source).toMatchObject({ debugInfo: false, skipReason: null });
    }
  });

  it('says what the file is, and that apply skips it', async () => {
    const [file] = tree('x86_64').files;
    if (file === undefined) throw new Error('no x86_64 debug file');
    const result = await runCli(['print', file.path]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^ {2}kind +debug-info \(objcopy --only-keep-debug; no dynamic data\)$/m);
    expect(result.stdout).toMatch(/^ {2}apply +skips \(debug-info\)$/m);
  });
});

describe('apply, check and plan over an output and its debug output', () => {
  let work: string;
  /** The copied trees' debug files and the output files beside them. */
  let debugFiles: string[];
  let outputFiles: string[];

  beforeAll(async () => {
    work = await makeTempDir('debug-info');
    for (const variant of DEBUG_INFO_VARIANTS) await copyTree(tree(variant).root, join(work, variant));
    const copied = (path: string, variant: string): string => join(work, variant, relative(tree(variant).root, path));
    debugFiles = DEBUG_INFO_VARIANTS.flatMap((variant) => tree(variant).files.map((f) => copied(f.path, variant)));
    outputFiles = [...new Set(DEBUG_INFO_VARIANTS.flatMap((variant) => tree(variant).files.map((f) => copied(f.source, variant))))];
  });

  it('check: exit 1, naming only the output files', async () => {
    const result = await runCli(['check', work]);
    expect(result.code, result.stderr).toBe(1);
    expect(
      parseCheck(result.stdout)
        .files.map((f) => f.path)
        .sort(),
    ).toEqual([...outputFiles].sort());
  });

  it('plan: only the output files, the debug files counted as skipped', async () => {
    const result = await runCli(['plan', work]);
    expect(result.code, result.stderr).toBe(0);
    expect(
      parsePlan(result.stdout)
        .map((block) => block.path)
        .sort(),
    ).toEqual([...outputFiles].sort());
    expect(parseSummaryLine(result.stdout).skipped['debug-info']).toBe(debugFiles.length);
  });

  it('apply: exit 0, the output patched, every debug file byte-identical and skipped as debug-info', async () => {
    const before = await snapshotTree(work);
    const result = await runCli(['apply', '--json', work]);
    expect(result.code, result.stderr).toBe(0);
    const report = parseReport(result.stdout);
    expect(report.summary.skipped['debug-info']).toBe(debugFiles.length);
    expect(report.summary.failed).toBe(0);
    const skipped = report.files.filter((f) => f.status === 'skipped' && f.reason === 'debug-info').map((f) => f.path);
    expect(skipped.sort()).toEqual([...debugFiles].sort());
    const changed = contentDifferences(before, await snapshotTree(work));
    expect(changed).toEqual(outputFiles.map((file) => `${relative(work, file)}: content or mode differs`).sort());
    for (const file of outputFiles) {
      const facts = await readDynamic(file);
      expect(facts === null ? null : effectiveRunpath(facts)?.split(':')[0], file).toBe(DRIVER_LIB);
    }
  });

  it('check after apply: nothing to do', async () => {
    const result = await runCli(['check', work]);
    expect(result.code, result.stdout).toBe(0);
    expect(parseCheck(result.stdout)).toEqual({ files: [], last: 'cuda-patchelf check: nothing to do' });
  });

  it('apply on the debug output alone: exit 0, nothing written', async () => {
    const debugOutput = join(work, 'x86_64', 'debug');
    const before = await snapshotTree(debugOutput);
    const result = await runCli(['apply', debugOutput]);
    expect(result.code, result.stderr).toBe(0);
    const summary = parseSummaryLine(result.stdout);
    expect({ patched: summary.patched, failed: summary.failed, debugInfo: summary.skipped['debug-info'] }).toEqual({
      patched: 0,
      failed: 0,
      debugInfo: tree('x86_64').files.filter((f) => f.tool === 'objcopy').length,
    });
    expect(contentDifferences(before, await snapshotTree(debugOutput))).toEqual([]);
  });
});

describe('single-file editing commands refuse a debug-info file, untouched', () => {
  const commands: Array<[string, string[]]> = [
    ['set-runpath', ['set-runpath', DRIVER_LIB]],
    ['add-runpath', ['add-runpath', DRIVER_LIB]],
    ['add-runpath --append', ['add-runpath', '--append', DRIVER_LIB]],
    ['remove-runpath', ['remove-runpath', '/opt/cuda-patchelf-fixture/lib']],
    ['remove-runpath --all', ['remove-runpath', '--all']],
    ['add-needed', ['add-needed', 'libcuda.so.1']],
    ['remove-needed', ['remove-needed', 'libgreet.so.1']],
    ['replace-needed', ['replace-needed', 'libgreet.so.1', 'libother.so.1']],
    ['set-runpath --dry-run', ['set-runpath', '--dry-run', DRIVER_LIB]],
  ];

  it.each(commands)('%s: exit 3, one line naming the file', async (_name, args) => {
    const files = await copiesOfDebugFiles('debug-info-edit');
    const result = await runCli([...args, ...files]);
    expect(result.code, result.stderr).toBe(3);
    expect(result.stdout).toBe('');
    expect(stderrLines(result)).toEqual(files.map((file) => `cuda-patchelf: ${file}: ${REFUSAL}`));
    await expectUntouched(files);
  });

  it('--output: no output file is made', async () => {
    const work = await makeTempDir('debug-info-output');
    const [source] = allDebugFiles;
    if (source === undefined) throw new Error('no debug files');
    const output = join(work, 'out.debug');
    const result = await runCli(['set-runpath', '--output', output, DRIVER_LIB, source.path]);
    expect(result.code, result.stderr).toBe(3);
    expect(stderrLines(result)).toEqual([`cuda-patchelf: ${source.path}: ${REFUSAL}`]);
    await expect(access(output)).rejects.toThrow();
  });
});

describe('the patchelf-compatible mode on debug-info files', () => {
  // patchelf sees their .dynamic is SHT_NOBITS and leaves the runpath alone: nothing printed, exit 0,
  // not a byte written. Both tools get every debug file in one call.
  const runpathFlags: Array<[string, string[]]> = [
    ['--print-rpath', ['--print-rpath']],
    ['--set-rpath', ['--set-rpath', DRIVER_LIB]],
    ['--add-rpath', ['--add-rpath', DRIVER_LIB]],
    ['--remove-rpath', ['--remove-rpath']],
    ['--shrink-rpath', ['--shrink-rpath']],
    ['--force-rpath --set-rpath', ['--force-rpath', '--set-rpath', DRIVER_LIB]],
  ];

  it.each(runpathFlags)('%s: what patchelf prints and exits with, the files byte-identical', async (_name, args) => {
    const ours = await copiesOfDebugFiles('debug-info-ours');
    const theirs = await copiesOfDebugFiles('debug-info-patchelf');
    const patchelf = await execTool(requireTool('patchelf'), [...args, ...theirs]);
    const result = await runCli([...args, ...ours]);
    expect({ code: result.code, stdout: result.stdout, stderr: result.stderr }).toEqual({
      code: patchelf.code,
      stdout: patchelf.stdout,
      stderr: patchelf.stderr,
    });
    expect(result.code).toBe(0);
    await expectUntouched(ours);
    await expectUntouched(theirs);
  });

  // What patchelf answers for the other flags comes from whatever bytes lie at the NOBITS section's
  // offset (garbage, a crash, or a corrupted write for --add-needed), so cuda-patchelf answers from
  // the file having no dynamic entries: no needed libraries and no soname to print, none to remove or
  // rename; nowhere to add one.
  it.each([
    ['--print-needed', ['--print-needed']],
    ['--print-soname', ['--print-soname']],
    ['--remove-needed', ['--remove-needed', 'libgreet.so.1']],
    ['--replace-needed', ['--replace-needed', 'libgreet.so.1', 'libother.so.1']],
  ])('%s: nothing printed, exit 0, the files byte-identical', async (_name, args) => {
    const files = await copiesOfDebugFiles('debug-info-needed');
    const result = await runCli([...args, ...files]);
    expect({ code: result.code, stdout: result.stdout, stderr: result.stderr }).toEqual({ code: 0, stdout: '', stderr: '' });
    await expectUntouched(files);
  });

  it('--add-needed: exit 1, one line per file, the files byte-identical', async () => {
    const files = await copiesOfDebugFiles('debug-info-add-needed');
    const result = await runCli(['--add-needed', 'libcuda.so.1', ...files]);
    expect(result.code).toBe(1);
    expect(stderrLines(result)).toEqual(files.map((file) => `cuda-patchelf: ${file}: ${REFUSAL}`));
    await expectUntouched(files);
  });

  it('--print-interpreter: exit 1, the path is not in the file', async () => {
    const files = await copiesOfDebugFiles('debug-info-interpreter');
    const result = await runCli(['--print-interpreter', ...files]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(stderrLines(result)).toEqual(
      files.map((file) => `cuda-patchelf: ${file}: a debug-info file (objcopy --only-keep-debug): the interpreter path is not in it`),
    );
  });

  it('--output: a byte-identical copy, as patchelf writes', async () => {
    const [source] = allDebugFiles;
    if (source === undefined) throw new Error('no debug files');
    const work = await makeTempDir('debug-info-compat-output');
    const ours = join(work, 'ours.debug');
    const theirs = join(work, 'theirs.debug');
    expect((await execTool(requireTool('patchelf'), ['--set-rpath', DRIVER_LIB, '--output', theirs, source.path])).code).toBe(0);
    const result = await runCli(['--set-rpath', DRIVER_LIB, '--output', ours, source.path]);
    expect(result.code, result.stderr).toBe(0);
    const original = await readFile(source.path);
    expect(Buffer.compare(await readFile(theirs), original)).toBe(0);
    expect(Buffer.compare(await readFile(ours), original)).toBe(0);
  });
});
