// The batch alone, warm: every file of a tree through patchTrees with one thread (the driver and
// cuda_compat hooks, a dry run: nothing is written), as `apply --dry-run --jobs 1` runs it, in one
// process, several passes, the time of each. Start-up, the first pass's compilation and the disk are
// out of the later passes, which is what makes two revisions comparable on a machine whose
// whole-process timings move by 10-30 % between runs.
//
//   npx vite-node bench/pipeline-passes.ts TREE [PASSES] [CHECKOUT]
//
// CHECKOUT is another checkout's root (default: this one), e.g. one made with
// `git worktree add /tmp/before REV`; run the two alternately and compare the fastest passes.

import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const [tree, passesArgument = '5', checkoutArgument] = process.argv.slice(2);
if (tree === undefined) throw new Error('usage: vite-node bench/pipeline-passes.ts TREE [PASSES] [CHECKOUT]');
const checkout = resolve(checkoutArgument ?? fileURLToPath(new URL('..', import.meta.url)));
const passes = Number(passesArgument);

type PatchTrees = typeof import('../src/batch/patch-tree.js').patchTrees;
type BuiltinHooks = typeof import('../src/hooks/builtin-hooks.js');
type OrderHooks = typeof import('../src/hooks/order-hooks.js').orderHooks;

const { patchTrees } = (await import(`${checkout}/src/batch/patch-tree.ts`)) as { patchTrees: PatchTrees };
const { driverHook, cudaCompatHook, BUILTIN_HOOK_NAMES } = (await import(`${checkout}/src/hooks/builtin-hooks.ts`)) as BuiltinHooks;
const { orderHooks } = (await import(`${checkout}/src/hooks/order-hooks.ts`)) as { orderHooks: OrderHooks };

const hooks = orderHooks([driverHook(), cudaCompatHook('/nix/store/00000000000000000000000000000000-cuda_compat')], BUILTIN_HOOK_NAMES);
const times: number[] = [];
let files = 0;
for (let pass = 0; pass < passes; pass++) {
  const started = performance.now();
  const { summary } = await patchTrees([tree], { hooks, semantics: 'default', dryRun: true, jobs: 1 });
  files = summary.visited;
  times.push(Math.round(performance.now() - started));
}
console.log(`${checkout}: ${files} files; passes ${times.join(' ')} ms; fastest ${Math.min(...times)} ms`);
