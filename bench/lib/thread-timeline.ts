// Where each thread of one run spends its time: the CPU profiles that `node --cpu-prof` writes for the
// main thread and every worker thread (one file each, on one clock), as each thread's start, end, busy
// and idle time, and the main thread's busy time in 20 ms buckets with the functions that fill them.
//
//   npx vite-node bench/lib/thread-timeline.ts MAIN_PROFILE [WORKER_PROFILE…]

import { readFileSync } from 'node:fs';

interface Profile {
  readonly startTime: number;
  readonly endTime: number;
  readonly nodes: readonly { readonly id: number; readonly callFrame: { readonly functionName: string } }[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const BUCKET_MICROS = 20_000;
const ms = (micros: number): string => (micros / 1000).toFixed(0);

const profiles = process.argv.slice(2).map((file) => JSON.parse(readFileSync(file, 'utf8')) as Profile);
const origin = Math.min(...profiles.map((profile) => profile.startTime));
for (const [index, profile] of profiles.entries()) {
  const names = new Map(profile.nodes.map((node) => [node.id, node.callFrame.functionName || '(anonymous)']));
  const buckets = new Map<number, Map<string, number>>();
  let at = profile.startTime;
  let busy = 0;
  let idle = 0;
  for (const [i, sample] of profile.samples.entries()) {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    const name = names.get(sample) ?? '?';
    if (name === '(idle)') {
      idle += delta;
      continue;
    }
    busy += delta;
    const bucket = Math.floor((at - origin) / BUCKET_MICROS);
    const functions = buckets.get(bucket) ?? new Map<string, number>();
    functions.set(name, (functions.get(name) ?? 0) + delta);
    buckets.set(bucket, functions);
  }
  console.log(
    `thread ${index}: start ${ms(profile.startTime - origin)} end ${ms(profile.endTime - origin)} busy ${ms(busy)} idle ${ms(idle)}`,
  );
  if (index !== 0) continue;
  for (const [bucket, functions] of [...buckets].sort((a, b) => a[0] - b[0])) {
    const total = [...functions.values()].reduce((a, b) => a + b, 0);
    const top = [...functions]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 4)
      .map(([name, micros]) => `${name} ${(micros / 1000).toFixed(1)}`);
    console.log(
      `   ${(bucket * BUCKET_MICROS) / 1000}-${((bucket + 1) * BUCKET_MICROS) / 1000} ms: busy ${(total / 1000).toFixed(1)}: ${top.join(', ')}`,
    );
  }
}
