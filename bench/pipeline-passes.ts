// The batch alone, warm: every file of a tree through patchTrees with one thread (the driver and
// cuda_compat hooks, a dry run: nothing is written), as `apply --dry-run --jobs 1` runs it, in one
// process, several passes, the time of each. Start-up, the first pass's compilation and the disk are
// out of the later passes, which is what makes two revisions comparable on a machine whose
// whole-process timings move by 10-30 % between runs.
//
//   npx vite-node bench/pipeline-passes.ts TREE [PASSES] [CHECKOUT] [--cpu | --allocations]
//
// CHECKOUT is another checkout's root (default: this one), e.g. one made with
// `git worktree add /tmp/before REV`; run the two alternately and compare the fastest passes.
//
// --cpu profiles every pass (V8's sampling profiler, in this process) and prints, per pass, the time
// sampled and the garbage collector's share, then the functions whose own time differs most between
// the first pass and the last: what the first pass's warm-up is made of.
// --allocations runs one more pass under V8's sampling heap profiler, counting what the collector has
// already freed too, and prints the bytes allocated, per planned ELF file, and by allocating function
// (a call into Node or V8 counts for the project function that made it).

import { Session } from 'node:inspector/promises';
import { relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { textToByteString } from '../src/elf/byte-string.js';

const flags = process.argv.slice(2).filter((argument) => argument.startsWith('--'));
const [tree, passesArgument = '5', checkoutArgument] = process.argv.slice(2).filter((argument) => !argument.startsWith('--'));
const mode = flags[0];
if (tree === undefined || flags.length > 1 || (mode !== undefined && mode !== '--cpu' && mode !== '--allocations')) {
  throw new Error('usage: vite-node bench/pipeline-passes.ts TREE [PASSES] [CHECKOUT] [--cpu | --allocations]');
}
const checkout = resolve(checkoutArgument ?? fileURLToPath(new URL('..', import.meta.url)));
const passes = Number(passesArgument);
if (!Number.isInteger(passes) || passes < 1) throw new Error(`PASSES is a positive whole number, not ${passesArgument}`);

type PatchTrees = typeof import('../src/batch/patch-tree.js').patchTrees;
type BuiltinHooks = typeof import('../src/hook-engine/builtin-hooks.js');
type OrderHooks = typeof import('../src/hook-engine/order-hooks.js').orderHooks;

const { patchTrees } = (await import(`${checkout}/src/batch/patch-tree.ts`)) as { patchTrees: PatchTrees };
const { driverHook, cudaCompatHook, BUILTIN_HOOK_NAMES } = (await import(`${checkout}/src/hooks/builtin-hooks.ts`)) as BuiltinHooks;
const { orderHooks } = (await import(`${checkout}/src/hooks/order-hooks.ts`)) as { orderHooks: OrderHooks };

const hooks = orderHooks(
  [driverHook(), cudaCompatHook(textToByteString('/nix/store/00000000000000000000000000000000-cuda_compat'))],
  BUILTIN_HOOK_NAMES,
);
const runPass = (): ReturnType<PatchTrees> => patchTrees([tree], { hooks, semantics: 'default', dryRun: true, jobs: 1, cpuCount: 1 });

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
}

/** A frame's file: a path (vite-node), a file: URL, `node:…`, or '' for V8's own frames. */
const framePath = (frame: CallFrame): string => (frame.url.startsWith('file://') ? fileURLToPath(frame.url) : frame.url);

/**
 * `planEdit src/plan/plan-edit.ts`; Node's and V8's frames keep their own names. No line: the profiler
 * counts lines in the code vite-node runs, which are not the source's.
 */
function frameName(frame: CallFrame): string {
  const path = framePath(frame);
  const shown = path.startsWith('/') ? relative(checkout, path) : path;
  return `${frame.functionName === '' ? '(anonymous)' : frame.functionName}${shown === '' ? '' : ` ${shown}`}`;
}

const isProjectFrame = (frame: CallFrame): boolean => framePath(frame).startsWith(`${checkout}/`) && !frame.url.includes('/node_modules/');

// Only a profiling run talks to the inspector: a plain one times the passes as they are.
const session = mode === undefined ? null : new Session();
session?.connect();
if (session !== null && mode === '--cpu') {
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
}

const times: number[] = [];
// Pass boundaries on the profiler's clock (CLOCK_MONOTONIC, in microseconds).
const boundaries: number[] = [];
let files = 0;
/** Files the pass planned: the ELF files it would patch or found done (not those it skips). */
let plannedFiles = 0;
for (let pass = 0; pass < passes; pass++) {
  boundaries.push(Number(process.hrtime.bigint() / 1000n));
  const started = performance.now();
  const { summary } = await runPass();
  files = summary.visited;
  plannedFiles = Object.values(summary.patched).reduce((sum, count) => sum + count, 0) + summary.unchanged;
  times.push(Math.round(performance.now() - started));
}
boundaries.push(Number(process.hrtime.bigint() / 1000n));
console.log(`${checkout}: ${files} files; passes ${times.join(' ')} ms; fastest ${Math.min(...times)} ms`);

if (session !== null && mode === '--cpu') {
  interface CpuProfile {
    readonly nodes: readonly { readonly id: number; readonly callFrame: CallFrame }[];
    readonly startTime: number;
    readonly samples: readonly number[];
    readonly timeDeltas: readonly number[];
  }
  const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: CpuProfile };
  const names = new Map(profile.nodes.map((node) => [node.id, frameName(node.callFrame)]));
  const perPass = Array.from({ length: passes }, () => new Map<string, number>());
  let at = profile.startTime;
  for (const [i, sample] of profile.samples.entries()) {
    at += profile.timeDeltas[i] ?? 0;
    const pass = boundaries.findIndex((start, index) => at >= start && at < (boundaries[index + 1] ?? -Infinity));
    const self = perPass[pass];
    if (self === undefined) continue;
    const name = names.get(sample) ?? '?';
    self.set(name, (self.get(name) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const ms = (micros: number): string => (micros / 1000).toFixed(1);
  const total = (self: Map<string, number>): number =>
    [...self].reduce((sum, [name, micros]) => (name === '(idle)' ? sum : sum + micros), 0);
  for (const [pass, self] of perPass.entries()) {
    console.log(`pass ${pass}: sampled ${ms(total(self))} ms, garbage collector ${ms(self.get('(garbage collector)') ?? 0)} ms`);
  }
  const first = perPass[0] ?? new Map<string, number>();
  const last = perPass[passes - 1] ?? new Map<string, number>();
  const differences = [...new Set([...first.keys(), ...last.keys()])]
    .map((name) => ({ name, first: first.get(name) ?? 0, last: last.get(name) ?? 0 }))
    .sort((a, b) => b.first - b.last - (a.first - a.last));
  console.log(`own time, first pass against last (ms), the ${Math.min(30, differences.length)} largest differences:`);
  for (const { name, first: a, last: b } of differences.slice(0, 30))
    console.log(`${ms(a).padStart(8)} ${ms(b).padStart(8)} ${ms(a - b).padStart(8)}  ${name}`);
}

if (session !== null && mode === '--allocations') {
  interface AllocationNode {
    readonly callFrame: CallFrame;
    readonly selfSize: number;
    readonly children: readonly AllocationNode[];
  }
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 1024,
    // Not in Node 20's protocol types: without them, only what is still alive at the end is counted.
    ...{ includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true },
  });
  await runPass();
  const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as { profile: { head: AllocationNode } };
  const bySite = new Map<string, number>();
  let allocated = 0;
  const visit = (node: AllocationNode, site: string): void => {
    const here = isProjectFrame(node.callFrame) ? frameName(node.callFrame) : site;
    bySite.set(here, (bySite.get(here) ?? 0) + node.selfSize);
    allocated += node.selfSize;
    for (const child of node.children) visit(child, here);
  };
  visit(profile.head, '(outside the project)');
  const megabytes = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);
  console.log(
    `one more pass, sampled: ${megabytes(allocated)} MiB allocated, ${(allocated / 1024 / Math.max(1, plannedFiles)).toFixed(0)} KiB per planned ELF file (${plannedFiles})`,
  );
  for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, 30))
    console.log(`${megabytes(bytes).padStart(8)} MiB  ${site}`);
}
session?.disconnect();
