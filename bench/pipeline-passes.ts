// The per-file pipeline alone, warm: every file of a tree through processFile (the driver and
// cuda_compat hooks, a dry run: nothing is written) in one process, several passes, the time of each.
// Start-up, the first pass's compilation and the disk are out of the later passes, which is what makes
// two revisions comparable on a machine whose whole-process timings move by 10-30 % between runs.
//
//   npx vite-node bench/pipeline-passes.ts TREE [PASSES] [CHECKOUT]
//
// CHECKOUT is another checkout's root (default: this one), e.g. one made with
// `git worktree add /tmp/before REV`; run the two alternately and compare the fastest passes.

import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const [tree, passesArgument = '5', checkoutArgument] = process.argv.slice(2);
if (tree === undefined) throw new Error('usage: vite-node bench/pipeline-passes.ts TREE [PASSES] [CHECKOUT]');
const checkout = resolve(checkoutArgument ?? fileURLToPath(new URL('..', import.meta.url)));
const passes = Number(passesArgument);

type ProcessFile = typeof import('../src/batch/process-file.js').processFile;
type WalkTrees = typeof import('../src/batch/walk-trees.js').walkTrees;
type BuiltinHooks = typeof import('../src/hooks/builtin-hooks.js');
type OrderHooks = typeof import('../src/hooks/order-hooks.js').orderHooks;

// processFile has its own module since 2026-11-25; older checkouts export it from patch-tree.ts.
const processFileModule = existsSync(`${checkout}/src/batch/process-file.ts`) ? 'process-file' : 'patch-tree';
const { processFile } = (await import(`${checkout}/src/batch/${processFileModule}.ts`)) as { processFile: ProcessFile };
const { walkTrees } = (await import(`${checkout}/src/batch/walk-trees.ts`)) as { walkTrees: WalkTrees };
const { driverHook, cudaCompatHook, BUILTIN_HOOK_NAMES } = (await import(`${checkout}/src/hooks/builtin-hooks.ts`)) as BuiltinHooks;
const { orderHooks } = (await import(`${checkout}/src/hooks/order-hooks.ts`)) as { orderHooks: OrderHooks };

const hooks = orderHooks([driverHook(), cudaCompatHook('/nix/store/00000000000000000000000000000000-cuda_compat')], BUILTIN_HOOK_NAMES);
const times: number[] = [];
let files = 0;
for (let pass = 0; pass < passes; pass++) {
  const started = performance.now();
  files = 0;
  for await (const item of walkTrees([tree])) {
    if (item.kind !== 'file') continue;
    await processFile(item, { hooks, semantics: 'default', dryRun: true });
    files++;
  }
  times.push(Math.round(performance.now() - started));
}
console.log(`${checkout}: ${files} files; passes ${times.join(' ')} ms; fastest ${Math.min(...times)} ms`);
