// Applying is idempotent under the default semantics, and the order hooks are declared in does not matter:
// a second apply changes no byte and no timestamp and reports every file unchanged; the six declaration
// orders of driver, cuda-compat and remove-stubs (library API, and the same three as --config hooks through
// the CLI) give byte-identical trees; check exits 1 before and 0 after; apply --dry-run writes nothing.

import { rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { patchTrees } from '../src/batch/patch-tree.js';
import { cudaCompatHook, driverHook, removeStubsHook } from '../src/hook-engine/builtin-hooks.js';
import type { Hook } from '../src/hook-engine/hook.js';
import { orderHooks } from '../src/hook-engine/order-hooks.js';
import { requireTool } from './helpers/fixtures.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { cudaTreeIn, expectedPatched, type CudaTree } from './helpers/tree-cuda.js';
import { parseReport, parseSummaryLine } from './helpers/tree-report.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { contentDifferences, copyTree, permutations, snapshotTree, type TreeSnapshot } from './helpers/tree-tools.js';
import { BUILD_ARCHES } from './helpers/arch.js';
import { bytes } from './helpers/byte-strings.js';

const DRIVER = '/run/opengl-driver/lib';

let work = '';
let compat = '';
let tree: CudaTree;
let pristine: TreeSnapshot;
/** The tree after one CLI apply: the reference every other way of applying must reproduce. */
let once: TreeSnapshot;
let onceTree = '';

const hookFlags = (): string[] => ['--cuda-compat', compat, '--remove-stubs'];
const timeout = { timeoutMs: 120_000 };

/** Times and inodes too: a noop must not even touch a timestamp. */
function entries(snapshot: TreeSnapshot): Array<[string, unknown]> {
  return [...snapshot.entries()];
}

beforeAll(async () => {
  for (const tool of ['readelf', 'gcc', 'aarch64-linux-gnu-gcc', 'ar', 'aarch64-linux-gnu-ar', 'cp']) requireTool(tool);
  assertCliBuilt();
  work = await makeTempDir('idempotence');
  ({ compat, tree } = await cudaTreeIn(work, { arches: BUILD_ARCHES, large: false }));
  pristine = await snapshotTree(tree.root);
  onceTree = join(work, 'once');
  await copyTree(tree.root, onceTree);
  const first = await runCli(['apply', onceTree, ...hookFlags()], timeout);
  if (first.code !== 0) throw new Error(`apply exited ${String(first.code)}: ${first.stderr}`);
  once = await snapshotTree(onceTree);
}, 600_000);

afterAll(async () => {
  if (work !== '') await rm(work, { recursive: true, force: true });
});

describe('apply twice', () => {
  it('the second run reports every file unchanged and writes nothing, not even a timestamp', async () => {
    expect(contentDifferences(pristine, once).length).toBeGreaterThanOrEqual(expectedPatched(tree));
    const second = await runCli(['apply', onceTree, ...hookFlags(), '--json'], timeout);
    expect(second.stderr).toBe('');
    expect(second.code).toBe(0);
    const report = parseReport(second.stdout);
    expect(report.summary.patched).toEqual({});
    expect(report.summary.unchanged).toBe(expectedPatched(tree));
    expect(report.summary.bytesWritten).toBe(0);
    const unchanged = report.files.filter((f) => f.status === 'unchanged');
    expect(unchanged.map((f) => relative(onceTree, f.path)).sort()).toEqual(
      tree.entries
        .filter((e) => e.expect === 'dynamic' && report.files.find((f) => f.path === join(onceTree, e.rel))?.reason !== 'hard-link')
        .map((e) => e.rel)
        .sort(),
    );
    for (const file of unchanged)
      expect(file.runpath, file.path).toMatch(new RegExp(`^${compat.replace(/[.+]/g, '\\$&')}/compat:${DRIVER}`));
    expect(entries(await snapshotTree(onceTree))).toEqual(entries(once));
  });

  it('check exits 1 on the pristine tree and 0 once applied; a different compat directory is work again', async () => {
    const before = await runCli(['check', tree.root, ...hookFlags()], timeout);
    expect(before.code).toBe(1);
    expect(before.stdout).toContain(`cuda-patchelf check: ${expectedPatched(tree)} files need patching`);
    const after = await runCli(['check', onceTree, ...hookFlags()], timeout);
    expect(after.stdout).toBe('cuda-patchelf check: nothing to do\n');
    expect(after.code).toBe(0);
    const otherCompat = await runCli(['check', onceTree, '--cuda-compat', `${compat}-other`, '--remove-stubs'], timeout);
    expect(otherCompat.code).toBe(1);
    expect(otherCompat.stdout).toContain(`cuda-patchelf check: ${expectedPatched(tree)} files need patching`);
    // check wrote nothing either.
    expect(entries(await snapshotTree(onceTree))).toEqual(entries(once));
    expect(entries(await snapshotTree(tree.root))).toEqual(entries(pristine));
  });
});

describe('declaration order', () => {
  const builtins = (): Hook[] => [driverHook(), cudaCompatHook(bytes(compat)), removeStubsHook()];

  it('the six orders of the built-in hooks (library API) give byte-identical trees', async () => {
    for (const order of permutations([0, 1, 2])) {
      const declared = order.map((i) => builtins()[i] as Hook);
      const root = join(work, `api-${order.join('')}`);
      await copyTree(tree.root, root);
      const result = await patchTrees([root], { hooks: orderHooks(declared), semantics: 'default', jobs: 2, cpuCount: 2, dryRun: false });
      expect(result.summary.failed, order.join()).toBe(0);
      expect(
        Object.values(result.summary.patched).reduce((a, b) => a + b, 0),
        order.join(),
      ).toBe(expectedPatched(tree));
      expect(contentDifferences(await snapshotTree(root), once), order.join()).toEqual([]);
      await rm(root, { recursive: true, force: true });
    }
  });

  it('the same three as --config hooks, declared in six orders, give byte-identical trees through the CLI', async () => {
    const configHooks = [
      { name: 'stubs', removeMatching: '/lib/stubs' },
      { name: 'compat', prepend: [`${compat}/compat`], precedes: ['drv'] },
      { name: 'drv', prepend: [DRIVER] },
    ];
    for (const order of permutations([0, 1, 2])) {
      const root = join(work, `config-${order.join('')}`);
      await copyTree(tree.root, root);
      const file = join(work, `hooks-${order.join('')}.json`);
      await writeFile(file, JSON.stringify({ hooks: order.map((i) => configHooks[i]) }));
      const result = await runCli(['apply', root, '--no-driver', '--config', file, '--json'], timeout);
      expect(result.stderr, order.join()).toBe('');
      expect(result.code, order.join()).toBe(0);
      expect(parseReport(result.stdout).hooks, order.join()).toEqual(['drv', 'compat', 'stubs']);
      expect(contentDifferences(await snapshotTree(root), once), order.join()).toEqual([]);
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe('apply --dry-run', () => {
  it('reports what it would patch and writes nothing', async () => {
    const root = join(work, 'dry-run');
    await copyTree(tree.root, root);
    const before = await snapshotTree(root);
    const json = await runCli(['apply', root, ...hookFlags(), '--dry-run', '--json'], timeout);
    expect(json.code).toBe(0);
    const report = parseReport(json.stdout);
    expect(report.dryRun).toBe(true);
    expect(report.summary.bytesWritten).toBe(0);
    expect(Object.values(report.summary.patched).reduce((a, b) => a + b, 0)).toBe(expectedPatched(tree));
    const wouldPatch = report.files.filter((f) => f.status === 'would-patch');
    expect(wouldPatch).toHaveLength(expectedPatched(tree));
    for (const file of wouldPatch) expect(file.bytesWritten, file.path).toBe(0);
    const text = await runCli(['apply', root, ...hookFlags(), '--dry-run'], timeout);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/ would patch /);
    expect(parseSummaryLine(text.stdout)).toMatchObject({ patched: expectedPatched(tree), bytesWritten: 0, failed: 0 });
    expect(entries(await snapshotTree(root))).toEqual(entries(before));
    // The same run without --dry-run does change the tree, so the comparison above can fail.
    const real = await runCli(['apply', root, ...hookFlags()], timeout);
    expect(real.code).toBe(0);
    expect(contentDifferences(await snapshotTree(root), once)).toEqual([]);
  });
});
