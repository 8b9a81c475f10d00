// Hooks from a JSON file (--config), through the CLI: a hook limited to lib/** changes exactly the files
// under lib/, a missing or wrong config stops the run before anything is read, and every example of
// docs/hooks.md gives the runpath it shows. How a config text is read is test/unit/hook-config.test.ts's.

import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { mustExec } from './helpers/exec.js';
import { REPO_ROOT, fixture, ldList, requireTool, runProgram } from './helpers/fixtures.js';
import { assertCliBuilt, runCli, stderrLines } from './helpers/run-cli.js';
import { parseReport } from './helpers/tree-report.js';
import { copyTree, dedupeRunpath, snapshotTree } from './helpers/tree-tools.js';
import { effectiveRunpath, readDynamic, tagKind, type DynamicFacts } from './helpers/readelf.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const DRIVER = '/run/opengl-driver/lib';

describe('apply --config', () => {
  const work = useTempDir('hooks-config');
  let pristine = '';
  const before = new Map<string, DynamicFacts>();
  /** Dynamic ELF files of the small tree; under lib/ the config hook applies, elsewhere it must not. */
  const files: Array<{ rel: string; from: string }> = [];
  const config = {
    hooks: [{ name: 'origin-lib', prepend: ['$ORIGIN/../lib'], include: ['lib/**'], precedes: ['driver'] }],
  };
  const underLib = (rel: string): boolean => rel.startsWith('lib/');

  beforeAll(async () => {
    requireTool('readelf');
    assertCliBuilt();
    pristine = join(work(), 'pristine');
    files.push(
      { rel: 'bin/prog', from: fixture('compiled/x86_64/pie-runpath').path },
      { rel: 'bin/prog-rpath', from: fixture('compiled/x86_64/exec-rpath').path },
      { rel: 'libexec/cuda/prog-none', from: fixture('compiled/x86_64/pie-no-runpath').path },
      { rel: 'opt/lib/libgreet.so.1', from: fixture('compiled/x86_64/libgreet').path },
      { rel: 'lib/libgreet.so.1', from: fixture('compiled/x86_64/libgreet').path },
      { rel: 'lib/libuser.so', from: fixture('compiled/x86_64/libuser-runpath').path },
      { rel: 'lib/deep/er/libuser-rpath.so', from: fixture('compiled/x86_64/libuser-rpath').path },
      { rel: 'lib/libcudart.so.11.0', from: fixture('cuda/x86_64/libcudart11.0/libcudart.so.11.8.89').path },
    );
    for (const { rel, from } of files) {
      await mkdir(join(pristine, rel, '..'), { recursive: true });
      await copyFile(from, join(pristine, rel));
      const facts = await readDynamic(join(pristine, rel));
      if (facts === null) throw new Error(`${rel} has no dynamic section`);
      before.set(rel, facts);
    }
    await mkdir(join(pristine, 'share/doc'), { recursive: true });
    await writeFile(join(pristine, 'share/doc/README'), 'docs\n');
    await writeFile(join(work(), 'hooks.json'), JSON.stringify(config));
    // Naming an absent hook is a usage error (README), so the config used without the driver has no `precedes`.
    await writeFile(join(work(), 'hooks-alone.json'), JSON.stringify({ hooks: [{ ...config.hooks[0], precedes: [] }] }));
  }, 300_000);

  const factsBefore = (rel: string): DynamicFacts => {
    const facts = before.get(rel);
    if (facts === undefined) throw new Error(`no facts for ${rel}`);
    return facts;
  };

  it("prepends $ORIGIN/../lib to exactly the files under lib/, before the driver's entry", async () => {
    const tree = join(work(), 'with-driver');
    await copyTree(pristine, tree);
    const result = await runCli(['apply', tree, '--config', join(work(), 'hooks.json'), '--json'], { timeoutMs: 60_000 });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const report = parseReport(result.stdout);
    expect(report.hooks).toEqual(['driver', 'origin-lib']);
    expect(report.summary.patched).toEqual({ append: files.length });
    for (const { rel } of files) {
      const old = effectiveRunpath(factsBefore(rel));
      const now = await readDynamic(join(tree, rel));
      const head = underLib(rel) ? ['$ORIGIN/../lib', DRIVER] : [DRIVER];
      expect(effectiveRunpath(now ?? factsBefore(rel)), rel).toBe(dedupeRunpath([...head, old ?? ''].join(':')));
      expect(now === null ? null : tagKind(now), rel).toBe(tagKind(factsBefore(rel)) === 'none' ? 'RUNPATH' : tagKind(factsBefore(rel)));
      const outcome = report.files.find((f) => f.path === join(tree, rel));
      expect(outcome?.status, rel).toBe('patched');
      const fromConfig = (outcome?.entries ?? []).filter((e) => e.hook === 'origin-lib');
      expect(fromConfig, rel).toEqual(underLib(rel) ? [{ dir: '$ORIGIN/../lib', hook: 'origin-lib' }] : []);
    }
    // The patched program still finds libgreet through its own $ORIGIN/../lib.
    const { stdout } = await runProgram(fixture('compiled/x86_64/pie-runpath'), { path: join(tree, 'bin/prog'), libraryPath: null });
    expect(stdout.trim()).toBe('hello from libgreet');
    // The added entry resolves where a library expects it to: lib/libuser.so finds lib/libgreet.so.1.
    const listed = await ldList(join(tree, 'lib/libuser.so'), 'x86_64', { libraryPath: null });
    expect(listed).toMatch(new RegExp(`libgreet\\.so\\.1 => ${join(tree, 'lib')}/(\\.\\./lib/)?libgreet\\.so\\.1 `));
  });

  it('with --no-driver, applies only the config hook and leaves the other files byte-identical', async () => {
    const tree = join(work(), 'config-only');
    await copyTree(pristine, tree);
    const snapshot = await snapshotTree(tree);
    const result = await runCli(['apply', tree, '--no-driver', '--config', join(work(), 'hooks-alone.json'), '--json'], {
      timeoutMs: 60_000,
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const report = parseReport(result.stdout);
    expect(report.hooks).toEqual(['origin-lib']);
    const after = await snapshotTree(tree);
    for (const { rel } of files) {
      const outcome = report.files.find((f) => f.path === join(tree, rel));
      if (underLib(rel)) {
        expect(outcome?.status, rel).toBe('patched');
        const now = await readDynamic(join(tree, rel));
        expect(now === null ? null : effectiveRunpath(now), rel).toBe(
          dedupeRunpath(['$ORIGIN/../lib', effectiveRunpath(factsBefore(rel)) ?? ''].join(':')),
        );
      } else {
        expect({ status: outcome?.status, reason: outcome?.reason }, rel).toEqual({ status: 'skipped', reason: 'no-hook' });
        expect(after.get(rel), rel).toEqual(snapshot.get(rel));
      }
    }
    expect(report.summary.skipped).toEqual({ 'no-hook': files.filter((f) => !underLib(f.rel)).length, 'not-elf': 1 });
  });

  /** `apply --config file` (and `flags`) on a fresh copy of the tree named `name`: exit 2, nothing written; the one line it prints. */
  async function refusedConfig(name: string, file: string, flags: readonly string[] = []): Promise<string> {
    const tree = join(work(), name);
    await copyTree(pristine, tree);
    const snapshot = await snapshotTree(tree);
    const result = await runCli(['apply', tree, ...flags, '--config', file], { timeoutMs: 60_000 });
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    const lines = stderrLines(result);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^cuda-patchelf: /);
    expect([...(await snapshotTree(tree)).entries()]).toEqual([...snapshot.entries()]);
    return lines[0] ?? '';
  }

  it('a missing config file: exit 2, one line naming it, nothing written', async () => {
    const missing = join(work(), 'no-such-hooks.json');
    const line = await refusedConfig('missing-config', missing);
    expect(line).toContain(missing);
    expect(line).toMatch(/ENOENT|no such file/i);
  });

  const wrongConfigs: Array<[string, unknown, RegExp]> = [
    [
      'an invalid config',
      { hooks: [{ name: 'a', prepend: ['/x:/y'] }] },
      /hook config: hook "a": prepend entry "\/x:\/y" contains ':', the runpath separator/,
    ],
    ['a hook named like a built-in', { hooks: [{ name: 'driver', prepend: ['/x'] }] }, /"driver" is declared twice/],
    [
      'a hook placed against an unknown hook',
      { hooks: [{ name: 'a', prepend: ['/x'], precedes: ['cuda-compatt'] }] },
      /hook "a" refers to unknown hook "cuda-compatt"/,
    ],
    ['a cycle with a built-in', { hooks: [{ name: 'a', prepend: ['/x'], precedes: ['driver'], follows: ['driver'] }] }, /cycle/],
    [
      'an appended entry before a prepended one',
      { hooks: [{ name: 'a', append: ['/x'], precedes: ['driver'] }] },
      /hook "a" puts the entries of "a" before those of "driver", but "a" appends and "driver" prepends: appended entries always come after prepended ones/,
    ],
    [
      'a hook placed against remove-stubs',
      { hooks: [{ name: 'a', prepend: ['/x'], follows: ['remove-stubs'] }] },
      /hook "a": follows names "remove-stubs", which adds no entries of its own/,
    ],
    [
      'the run-order "after" of older configs',
      { hooks: [{ name: 'a', prepend: ['/x'], after: ['driver'] }] },
      /hook config: hook "a": "after" is no longer read .*; write "precedes": \["driver"\]/,
    ],
  ];

  it('a hook placed against a built-in that is turned off: the constraint has nothing to order, and the hook applies', async () => {
    const tree = join(work(), 'after-absent-builtin');
    await copyTree(pristine, tree);
    const file = join(work(), 'after-absent-builtin.json');
    await writeFile(file, JSON.stringify({ hooks: [{ name: 'a', prepend: ['/opt/a'], precedes: ['cuda-compat'] }] }));
    const result = await runCli(['apply', tree, '--config', file, '--json'], { timeoutMs: 60_000 });
    expect(result.code, result.stderr).toBe(0);
    const report = JSON.parse(result.stdout) as { hooks: string[]; summary: { patched: Record<string, number> } };
    expect(report.hooks).toEqual(['driver', 'a']);
    expect(Object.values(report.summary.patched).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  });

  it.each(wrongConfigs)('%s: exit 2, one line, nothing written', async (label, content, message) => {
    const name = `wrong-${label.replace(/\W+/g, '-')}`;
    const file = join(work(), `${name}.json`);
    await writeFile(file, JSON.stringify(content));
    expect(await refusedConfig(name, file, ['--remove-stubs'])).toMatch(message);
  });
});

describe('the examples of docs/hooks.md', () => {
  /** Each ```json block followed by "Resulting runpath[, with `FLAGS`][, of `START`]: `RESULT`". */
  const EXAMPLE = /```json\n([\s\S]*?)```\n\nResulting runpath(?:, with `([^`]*)`)?(?:, of `([^`]*)`)?: `([^`]*)`/g;
  const work = useTempDir('hooks-doc');

  beforeAll(assertCliBuilt);

  it('give the runpaths they show, on a real library, as patchelf reads them back', async () => {
    const patchelf = requireTool('patchelf');
    const text = await readFile(join(REPO_ROOT, 'docs', 'hooks.md'), 'utf8');
    const examples = [...text.matchAll(EXAMPLE)];
    expect(examples.length).toBe(3);
    // Every config block of the page has its runpath.
    expect(examples.length).toBe(text.match(/```json\n/g)?.length);
    for (const [index, [, config = '', flags, start, result]] of examples.entries()) {
      const tree = join(work(), `example-${index}`);
      const library = join(tree, 'lib', 'libfoo.so');
      await mkdir(join(tree, 'lib'), { recursive: true });
      await copyFile(fixture('compiled/x86_64/libgreet').path, library);
      await mustExec(patchelf, ['--set-rpath', start ?? '/opt/old', library]);
      const configFile = join(work(), `example-${index}.json`);
      await writeFile(configFile, config);
      const applied = await runCli(['apply', tree, '--config', configFile, ...(flags === undefined ? [] : flags.split(' '))], {
        timeoutMs: 60_000,
      });
      expect(applied.code, applied.stderr).toBe(0);
      expect((await mustExec(patchelf, ['--print-rpath', library])).stdout.trim(), config).toBe(result);
    }
  });
});
