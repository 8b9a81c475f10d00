// What the tree commands say, and when: a reader that goes away (`plan | head -1`) ends the output
// quietly with the exit code the work deserves; `check` is a gate in both semantics, on a read-only
// tree too; what apply refuses, plan, check and dry runs say it would refuse, without failing; dry runs
// say "would patch"; --quiet and --verbose.

import { chmod, copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { fixture } from './helpers/fixtures.js';
import { assertCliBuilt, cliPath, runCli, stderrLines } from './helpers/run-cli.js';
import { parseCheck, parsePlan, parseReport, parseSummaryLine } from './helpers/tree-report.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { contentDifferences, snapshotTree } from './helpers/tree-tools.js';
import { readDynamic } from './helpers/readelf.js';
import { mustExec } from './helpers/exec.js';

const COMPAT = '/nix/store/00000000000000000000000000000000-cuda_compat';
const STUBS = '/nix/store/11111111111111111111111111111111-cuda_cudart/lib/stubs';

/** A tree of real libraries: with a runpath, without, with DT_RPATH, and one with a stubs entry. */
async function smallTree(label: string): Promise<string> {
  const root = await makeTempDir(label);
  await mkdir(join(root, 'lib'));
  await mkdir(join(root, 'bin'));
  await copyFile(fixture('compiled/x86_64/libuser-runpath').path, join(root, 'lib', 'libuser-runpath.so'));
  await copyFile(fixture('compiled/x86_64/libuser-no-runpath').path, join(root, 'lib', 'libuser-no-runpath.so'));
  await copyFile(fixture('compiled/x86_64/libuser-rpath').path, join(root, 'lib', 'libuser-rpath.so'));
  await copyFile(fixture('compiled/x86_64/pie-runpath').path, join(root, 'bin', 'app'));
  const stubbed = await runCli(['set-runpath', `$ORIGIN:${STUBS}`, join(root, 'bin', 'app')]);
  if (stubbed.code !== 0) throw new Error(stubbed.stderr);
  return root;
}

beforeAll(() => {
  assertCliBuilt();
});

describe('a reader that goes away', () => {
  let big: string;
  beforeAll(async () => {
    // Enough files that the output outgrows a pipe's buffer: the writer meets the closed pipe for sure.
    big = await makeTempDir('epipe');
    const source = fixture('compiled/x86_64/libuser-runpath').path;
    for (let i = 0; i < 400; i++) await copyFile(source, join(big, `lib${String(i).padStart(3, '0')}.so`));
  });

  const piped = async (args: string): Promise<{ first: string; code: number; stderr: string }> => {
    const script = `set -o pipefail; node ${cliPath} ${args} 2>"$1/stderr" | head -1; echo "exit:\${PIPESTATUS[0]}"`;
    const errDir = await makeTempDir('epipe-err');
    const { stdout } = await mustExec('bash', ['-c', script, 'bash', errDir], { env: process.env });
    const [first = '', exit = ''] = stdout.trimEnd().split('\n');
    const { readFile } = await import('node:fs/promises');
    return { first, code: Number(exit.replace('exit:', '')), stderr: await readFile(join(errDir, 'stderr'), 'utf8') };
  };

  it('plan | head -1: the first line, no stack trace, exit 0', async () => {
    const result = await piped(`plan ${big}`);
    expect(result.first).toMatch(/^\/.*lib000\.so \(\w+\)$/);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('check | head -1: exit 1, which says "needs patching", and no stack trace', async () => {
    const result = await piped(`check ${big}`);
    expect(result.first).toMatch(/lib000\.so: "\$ORIGIN:[^"]*" -> "\/run\/opengl-driver\/lib:/);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(1);
  });

  it('apply --verbose | head -1: every file still patched, exit 0', async () => {
    const tree = await makeTempDir('epipe-apply');
    for (let i = 0; i < 400; i++) await copyFile(join(big, `lib${String(i).padStart(3, '0')}.so`), join(tree, `lib${i}.so`));
    const result = await piped(`apply ${tree} --verbose`);
    expect(result.first).toMatch(/^patched \//);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const check = await runCli(['check', tree]);
    expect(check.code, check.stdout).toBe(0);
  });
});

describe('check as a gate', () => {
  for (const extra of [[], ['--remove-stubs']]) {
    it(`--nixpkgs-compat ${extra.join(' ')}: fails before apply --nixpkgs-compat, passes after once and after twice`, async () => {
      const root = await smallTree('gate-compat');
      const flags = ['--nixpkgs-compat', '--cuda-compat', COMPAT, ...extra];
      const before = await runCli(['check', root, ...flags]);
      expect(before.code, before.stdout).toBe(1);
      expect(before.stdout).toContain('cuda-patchelf check: 4 files need patching');
      for (const round of [1, 2]) {
        const apply = await runCli(['apply', root, ...flags]);
        expect(apply.code, apply.stderr).toBe(0);
        const after = await runCli(['check', root, ...flags]);
        expect({ round, code: after.code, stdout: after.stdout }).toEqual({
          round,
          code: 0,
          stdout: 'cuda-patchelf check: nothing to do\n',
        });
      }
      // The compat entry leads, then the driver's, as Nixpkgs' hook order has them; DT_RPATH became DT_RUNPATH.
      const rpath = await readDynamic(join(root, 'lib', 'libuser-rpath.so'));
      expect(rpath?.rpath).toBeNull();
      expect(rpath?.runpath?.startsWith(`${COMPAT}/compat:/run/opengl-driver/lib:`)).toBe(true);
      // Other hooks than the ones applied: still work to do.
      const other = await runCli(['check', root, '--nixpkgs-compat', '--cuda-compat', `${COMPAT}-other`, ...extra]);
      expect(other.code).toBe(1);
    });
  }

  it('--nixpkgs-compat: a file whose hook entries are out of order needs patching', async () => {
    const root = await smallTree('gate-order');
    const file = join(root, 'lib', 'libuser-runpath.so');
    expect((await runCli(['set-runpath', `/run/opengl-driver/lib:${COMPAT}/compat:$ORIGIN`, file])).code).toBe(0);
    const check = await runCli(['check', file, '--nixpkgs-compat', '--cuda-compat', COMPAT]);
    expect(check.code, check.stdout).toBe(1);
  });
});

/** Every entry of the tree without write permission, as a Nix store path is (`chmod -R a-w`). */
async function makeReadOnly(root: string): Promise<void> {
  await mustExec('chmod', ['-R', 'a-w', root]);
}

describe('apply refuses a file; plan, check and dry runs say it would, and do not fail', () => {
  it('check on a read-only tree (a Nix store path): a file apply would change is a file to patch, exit 1, and nothing on stderr', async () => {
    const root = await smallTree('store-path');
    const patched = await runCli(['apply', root, '--cuda-compat', COMPAT]);
    expect(patched.code, patched.stderr).toBe(0);
    // One file that the build did not patch, among patched ones; then the whole tree read-only.
    const unpatched = join(root, 'lib', 'libnew.so');
    await copyFile(fixture('compiled/x86_64/libuser-runpath').path, unpatched);
    await makeReadOnly(root);
    const before = await snapshotTree(root);

    const check = await runCli(['check', root, '--cuda-compat', COMPAT]);
    expect({ code: check.code, stderr: check.stderr }).toEqual({ code: 1, stderr: '' });
    const { files, last } = parseCheck(check.stdout);
    expect(files.map((f) => [f.path, f.refusal])).toEqual([
      [unpatched, 'read-only file (mode 555); pass --make-writable to edit it anyway'],
    ]);
    expect(files[0]?.new).toBe(`${COMPAT}/compat:/run/opengl-driver/lib:${files[0]?.old ?? ''}`);
    expect(last).toBe('cuda-patchelf check: 1 file needs patching (apply would refuse 1 of them as they are)');
    const json = parseReport((await runCli(['check', root, '--cuda-compat', COMPAT, '--json'])).stdout);
    expect(json.files.find((f) => f.path === unpatched)).toMatchObject({
      status: 'would-refuse',
      tier: 'append',
      refusal: expect.stringMatching(/^read-only file \(mode 555\)/),
    });
    expect({ wouldRefuse: json.summary.wouldRefuse, failed: json.summary.failed, unchanged: json.summary.unchanged }).toEqual({
      wouldRefuse: 1,
      failed: 0,
      unchanged: 4,
    });
    expect(contentDifferences(before, await snapshotTree(root))).toEqual([]);

    // The gate passes on a read-only tree that needs nothing.
    const done = await runCli(['check', root, '--cuda-compat', COMPAT, '--make-writable']);
    expect(done.code).toBe(1);
    await mustExec('chmod', ['u+w', join(root, 'lib')]);
    await rm(unpatched);
    const passes = await runCli(['check', root, '--cuda-compat', COMPAT]);
    expect({ code: passes.code, stdout: passes.stdout, stderr: passes.stderr }).toEqual({
      code: 0,
      stdout: 'cuda-patchelf check: nothing to do\n',
      stderr: '',
    });
  });

  it('a read-only file: plan and apply --dry-run say "apply would refuse it" and exit 0, apply fails it (exit 3), and --make-writable patches it', async () => {
    const root = await smallTree('agree');
    const readOnly = join(root, 'lib', 'libuser-runpath.so');
    await chmod(readOnly, 0o444);
    const before = await snapshotTree(root);
    const refusal = 'read-only file (mode 444); pass --make-writable to edit it anyway';

    const plan = await runCli(['plan', root]);
    expect({ code: plan.code, stderr: plan.stderr }).toEqual({ code: 0, stderr: '' });
    expect(parsePlan(plan.stdout).map((block) => [block.path, block.refusal])).toContainEqual([readOnly, refusal]);
    expect(parsePlan(plan.stdout).filter((block) => block.refusal !== null)).toHaveLength(1);
    expect(parseSummaryLine(plan.stdout)).toMatchObject({ patched: 3, wouldRefuse: 1, failed: 0 });

    // A dry run of apply shows the file apply would refuse without --verbose, as apply shows its failure.
    const dry = await runCli(['apply', root, '--dry-run']);
    expect({ code: dry.code, stderr: dry.stderr }).toEqual({ code: 0, stderr: '' });
    expect(dry.stdout.split('\n').slice(0, 2)).toEqual([
      expect.stringMatching(new RegExp(`^would patch ${readOnly}: "\\$ORIGIN:`)),
      `  apply would refuse it: ${refusal}`,
    ]);
    expect(parseSummaryLine(dry.stdout)).toMatchObject({ visited: 4, patched: 3, wouldRefuse: 1, failed: 0 });

    for (const name of ['plan', 'check', 'apply --dry-run']) {
      const report = parseReport((await runCli([...name.split(' '), root, '--json'])).stdout);
      expect(
        report.files.find((f) => f.path === readOnly),
        name,
      ).toMatchObject({ status: 'would-refuse', refusal });
      expect({ name, wouldRefuse: report.summary.wouldRefuse, failed: report.summary.failed }).toEqual({ name, wouldRefuse: 1, failed: 0 });
    }
    expect(contentDifferences(before, await snapshotTree(root))).toEqual([]);

    // apply itself refuses it: a failure, the others patched.
    const apply = await runCli(['apply', root, '--json']);
    expect({ code: apply.code, errors: stderrLines(apply) }).toEqual({ code: 3, errors: [`cuda-patchelf: ${readOnly}: ${refusal}`] });
    expect(parseReport(apply.stdout).files.find((f) => f.path === readOnly)).toMatchObject({
      status: 'failed',
      error: { kind: 'io', message: refusal },
    });
    const changed = contentDifferences(before, await snapshotTree(root));
    expect(changed.some((line) => line.includes('libuser-runpath.so'))).toBe(false);

    // With --make-writable, plan and check say what apply --make-writable does: no refusal.
    const writable = await runCli(['check', root, '--make-writable']);
    expect(writable.code).toBe(1);
    expect(parseCheck(writable.stdout).files).toEqual([expect.objectContaining({ path: readOnly, refusal: null })]);
    const applied = await runCli(['apply', root, '--make-writable']);
    expect(applied.code, applied.stderr).toBe(0);
    expect((await runCli(['check', root])).code).toBe(0);
  });

  it('check over files to patch and a file that fails: exit 3, and its last line counts both, never "nothing to do"', async () => {
    const root = await smallTree('check-failed');
    const broken = join(root, 'lib', 'libbroken.so');
    await writeFile(broken, (await readFile(fixture('compiled/x86_64/libuser-runpath').path)).subarray(0, 200));
    const both = await runCli(['check', root]);
    expect(both.code).toBe(3);
    expect(stderrLines(both)).toEqual([expect.stringMatching(new RegExp(`^cuda-patchelf: ${broken}: `))]);
    const { files, last } = parseCheck(both.stdout);
    expect(files).toHaveLength(4);
    expect(last).toBe('cuda-patchelf check: 1 failed, 4 files need patching');
    expect((await runCli(['apply', root])).code).toBe(3);
    const failedOnly = await runCli(['check', root]);
    expect({ code: failedOnly.code, stdout: failedOnly.stdout }).toEqual({
      code: 3,
      stdout: 'cuda-patchelf check: 1 failed, no other file needs patching\n',
    });
  });
});

describe('dry runs, --quiet and --verbose', () => {
  it('a dry run says "would patch", in text and JSON', async () => {
    const root = await smallTree('dry');
    for (const args of [
      ['apply', root, '--dry-run', '--json'],
      ['plan', root, '--json'],
      ['check', root, '--json'],
    ]) {
      const result = await runCli(args);
      const raw = JSON.parse(result.stdout) as {
        version: number;
        dryRun: boolean;
        summary: Record<string, unknown>;
        files: { status: string }[];
      };
      expect(raw.version).toBe(4);
      expect(raw.dryRun).toBe(true);
      expect(raw.summary.wouldPatch).toEqual({ append: 4 });
      expect(raw.summary).not.toHaveProperty('patched');
      expect(raw.files.filter((f) => f.status === 'would-patch')).toHaveLength(4);
      expect(raw.files.filter((f) => f.status === 'patched')).toHaveLength(0);
    }
    const text = await runCli(['apply', root, '--dry-run']);
    expect(text.stdout).toMatch(/^cuda-patchelf apply: 4 visited · 4 would patch \(4 append\)/m);
    const real = parseReport((await runCli(['apply', root, '--json'])).stdout);
    expect(real.files.filter((f) => f.status === 'patched')).toHaveLength(4);
  });

  it('--quiet prints nothing but errors', async () => {
    const root = await smallTree('quiet');
    await chmod(join(root, 'bin', 'app'), 0o555);
    // A file apply would refuse is no error of a dry run: only the exit code speaks.
    for (const [args, code] of [
      [['plan', root, '-q'], 0],
      [['check', root, '--quiet'], 1],
      [['apply', root, '--dry-run', '-q'], 0],
    ] as const) {
      const result = await runCli(args);
      expect({ args, stdout: result.stdout, stderr: result.stderr, code: result.code }).toEqual({ args, stdout: '', stderr: '', code });
    }
    const apply = await runCli(['apply', root, '--quiet']);
    expect(apply.stdout).toBe('');
    expect(stderrLines(apply)).toEqual([
      `cuda-patchelf: ${join(root, 'bin', 'app')}: read-only file (mode 555); pass --make-writable to edit it anyway`,
    ]);
    expect(apply.code).toBe(3);
  });

  it('--verbose prints a line per file patched and per ELF file left alone', async () => {
    const root = await smallTree('verbose');
    await copyFile(fixture('compiled/x86_64/static').path, join(root, 'bin', 'static'));
    const dry = await runCli(['apply', root, '--dry-run', '--verbose', '--remove-stubs']);
    const lines = dry.stdout.trimEnd().split('\n');
    expect(lines).toContain(`would patch ${join(root, 'bin', 'app')}: "$ORIGIN:${STUBS}" -> "/run/opengl-driver/lib:$ORIGIN"`);
    expect(lines).toContain(`would patch ${join(root, 'lib', 'libuser-no-runpath.so')}: (none) -> "/run/opengl-driver/lib"`);
    expect(lines).toContain(`skipped ${join(root, 'bin', 'static')}: static`);
    expect(lines.filter((line) => line.startsWith('would patch '))).toHaveLength(4);
    expect(lines[lines.length - 1]).toMatch(/^cuda-patchelf apply: 5 visited · 4 would patch/);
    const real = await runCli(['apply', root, '-v', '--remove-stubs']);
    expect(real.stdout.split('\n').filter((line) => line.startsWith('patched '))).toHaveLength(4);
    const again = await runCli(['apply', root, '-v', '--remove-stubs']);
    expect(again.stdout).toContain(`unchanged ${join(root, 'bin', 'app')}: "/run/opengl-driver/lib:$ORIGIN"`);
  });
});
