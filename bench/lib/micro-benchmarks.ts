// tinybench micro-benchmarks of the parts `apply` is made of: the reader (a small library against the
// same library grown to 1 GiB: the reader reads structures, not the file), the planner (pure, on facts
// read once) and hook composition (pure).

import { copyFile, mkdtemp, rm, stat, truncate } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { Bench, type Task } from 'tinybench';
import { FileByteSource } from '../../src/elf/byte-source.js';
import { joinRunpath } from '../../src/elf/runpath-list.js';
import { asciiByteString, textToByteString } from '../../src/elf/byte-string.js';
import { currentEntries, type EditFacts } from '../../src/plan/edit-facts.js';
import { readEditFacts, readLaterFact } from '../../src/edit/read-edit-facts.js';
import { readElfImage } from '../../src/elf/elf-image.js';
import { summarize } from '../../src/edit/summary.js';
import { BUILTIN_HOOK_NAMES, cudaCompatHook, driverHook, removeStubsHook } from '../../src/hook-engine/builtin-hooks.js';
import { composeRunpath } from '../../src/hook-engine/compose-hooks.js';
import { parseHookConfig } from '../../src/hook-engine/hook-config.js';
import { orderHooks } from '../../src/hook-engine/order-hooks.js';
import { DynamicEditor } from '../../src/plan/dynamic-editor.js';
import { planEdit } from '../../src/plan/plan-edit.js';

const GIB = 1024 ** 3;
const TIME_MS = 1_000;

export interface MicroRow {
  readonly group: string;
  readonly name: string;
  readonly meanMicros: number;
  readonly p99Micros: number;
  readonly samples: number;
  /** What the case is about (bytes read, the plan's tier...). */
  readonly note: string;
}

interface MicroCase {
  readonly name: string;
  readonly fn: () => unknown;
  readonly note: string;
}

function rowOf(group: string, c: MicroCase, task: Task | undefined): MicroRow {
  const result = task?.result;
  const latency = result !== undefined && 'latency' in result ? result.latency : undefined;
  return {
    group,
    name: c.name,
    meanMicros: latency === undefined ? NaN : latency.mean * 1000,
    p99Micros: latency?.p99 === undefined ? NaN : latency.p99 * 1000,
    samples: latency?.samplesCount ?? 0,
    note: c.note,
  };
}

async function runCases(group: string, cases: readonly MicroCase[]): Promise<MicroRow[]> {
  const bench = new Bench({ name: group, time: TIME_MS, warmupTime: 200 });
  for (const c of cases) bench.add(c.name, c.fn);
  await bench.run();
  return cases.map((c) => rowOf(group, c, bench.getTask(c.name)));
}

/** One full read as `print` does it; returns how many bytes came off the file. */
async function readOnce(path: string): Promise<number> {
  const source = FileByteSource.open(path);
  try {
    await summarize(await readElfImage(source));
    return source.bytesRead;
  } finally {
    source.close();
  }
}

/** The reader on `small` and on a copy of it grown to 1 GiB with sparse zeros (no disk space used). */
export async function readerBenchmarks(small: string): Promise<MicroRow[]> {
  const dir = await mkdtemp(join(tmpdir(), 'cuda-patchelf-bench-'));
  try {
    const big = join(dir, `${basename(small)}.1gib`);
    await copyFile(small, big);
    await truncate(big, (await stat(small)).size + GIB);
    const cases: MicroCase[] = [];
    for (const [name, path] of [
      [`${basename(small)} (${(await stat(small)).size} B)`, small],
      ['same + 1 GiB sparse', big],
    ] as const) {
      cases.push({ name, fn: () => readOnce(path), note: `${await readOnce(path)} bytes read` });
    }
    return await runCases('reader: image + summary', cases);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function factsOf(path: string): Promise<EditFacts> {
  const source = FileByteSource.open(path);
  try {
    const image = await readElfImage(source);
    // Every fact a plan can ask for, so that planEdit is timed on one pass.
    const facts = await readLaterFact(source, await readEditFacts(image), 'dynamic-symbols');
    return await readLaterFact(source, facts, 'symbol-table');
  } finally {
    source.close();
  }
}

/** Planning the driver + cuda_compat runpath for each library, from facts read once (no I/O timed). */
export async function plannerBenchmarks(libraries: readonly string[], cudaCompat: string): Promise<MicroRow[]> {
  const cases: MicroCase[] = [];
  for (const path of libraries) {
    const facts = await factsOf(path);
    const editor = new DynamicEditor(currentEntries(facts), facts.interpreter?.text ?? null);
    const old = editor.runpath();
    const added = [textToByteString(`${cudaCompat}/compat`), asciiByteString('/run/opengl-driver/lib')];
    editor.setRunpath(joinRunpath([...added, ...(old === null || old === '' ? [] : [old])]));
    const wanted = editor.wanted();
    const decision = planEdit(facts, wanted);
    cases.push({
      name: `${basename(path)} (${(facts.fileSize / 2 ** 20).toFixed(1)} MiB)`,
      fn: () => planEdit(facts, wanted),
      note: decision.kind === 'plan' ? `tier ${decision.plan.tier}, ${decision.plan.writes.length} writes` : decision.kind,
    });
  }
  return runCases('planner: planEdit', cases);
}

/** Ordering the hooks and folding them into one runpath for a file. */
export async function hookBenchmarks(cudaCompat: string): Promise<MicroRow[]> {
  const file = { relativePath: 'lib/libcublas.so.11', path: '/out/lib/libcublas.so.11', isSharedObject: true, machine: 62 };
  const two = [driverHook(), cudaCompatHook(textToByteString(cudaCompat))];
  const config = parseHookConfig(
    'bench.json',
    JSON.stringify({ hooks: [{ name: 'origin-lib', prepend: ['$ORIGIN/../lib'], include: ['lib/**'], precedes: ['driver'] }] }),
  );
  const four = [...two, removeStubsHook(), ...config];
  const orderedTwo = orderHooks(two, BUILTIN_HOOK_NAMES);
  const orderedFour = orderHooks(four, BUILTIN_HOOK_NAMES);
  const ORIGIN = asciiByteString('$ORIGIN');
  const ORIGIN_AND_STUBS = asciiByteString('$ORIGIN:/x/lib/stubs');
  return runCases('hooks: order + compose', [
    { name: 'orderHooks, 4 hooks', fn: () => orderHooks(four, BUILTIN_HOOK_NAMES), note: 'topological sort' },
    {
      name: 'compose driver + cuda-compat',
      fn: () => composeRunpath(orderedTwo, file, ORIGIN, 'default'),
      note: 'default semantics (dedupe)',
    },
    {
      name: 'compose driver + cuda-compat, nixpkgs-compat',
      fn: () => composeRunpath(orderedTwo, file, ORIGIN, 'nixpkgs-compat'),
      note: 'byte-identical to Nixpkgs',
    },
    {
      name: 'compose 4 hooks (one with a glob)',
      fn: () => composeRunpath(orderedFour, file, ORIGIN_AND_STUBS, 'default'),
      note: 'picomatch include',
    },
  ]);
}
