// Worker scripts that speak the pool's protocol (src/batch/worker-pool.ts, patch-worker.ts) without
// patching anything, for the pool and the scheduler in the unit tier, where the real worker (the bundle
// in dist/) is not built. Each is plain JavaScript, written to a .mjs file of a temporary directory.
//
// - answer: says it is ready, and answers each file at once as unchanged, with the runpath "worker"; a
//   file whose name starts with "exit" ends the thread (process.exit(7)) while it is the file in hand,
//   one starting with "throw" throws out of the thread, one starting with "fail" fails with a format
//   error at offset 0x10.
// - never-ready: loads and stays, but never says it is ready nor answers.
// - hold: ready, but holds every file until the test posts "release" on HOLD_CHANNEL; it posts how many
//   files it has received on the same channel each time more arrive ({ threadId, received }), and
//   answers each file held at the release with the runpath "held", those received later with "after".

import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export type FakeWorkerMode = 'answer' | 'never-ready' | 'hold';

export const HOLD_CHANNEL = 'cuda-patchelf-unit-fake-worker';

/** The exit code of a thread ended by an "exit" file. */
export const FAKE_EXIT_CODE = 7;

const PRELUDE = `
import { parentPort, threadId, workerData } from 'node:worker_threads';
const { current } = workerData;
const IDLE = -1;
const baseName = (path) => path.slice(path.lastIndexOf('/') + 1);
const answer = (id, outcome) => parentPort.postMessage({ outcomes: [{ id, outcome }] });
`;

const BODIES: Record<FakeWorkerMode, string> = {
  answer: `
parentPort.on('message', ({ items }) => {
  for (const { id, item } of items) {
    Atomics.store(current, 0, id);
    const name = baseName(item.path);
    if (name.startsWith('exit')) process.exit(${FAKE_EXIT_CODE});
    if (name.startsWith('throw')) throw new Error('thrown in the worker');
    Atomics.store(current, 0, IDLE);
    answer(
      id,
      name.startsWith('fail')
        ? { path: item.path, status: 'failed', error: { kind: 'format', message: 'bad bytes', file: item.path, offset: 16 } }
        : { path: item.path, status: 'unchanged', runpath: 'worker' },
    );
  }
});
parentPort.postMessage({ ready: true });
`,
  'never-ready': `
parentPort.on('message', () => undefined);
`,
  hold: `
const channel = new BroadcastChannel('${HOLD_CHANNEL}');
const held = [];
let received = 0;
let released = false;
const unchanged = (path, runpath) => ({ path, status: 'unchanged', runpath });
channel.onmessage = (event) => {
  if (event.data !== 'release') return;
  released = true;
  for (const { id, item } of held.splice(0)) answer(id, unchanged(item.path, 'held'));
};
parentPort.on('message', ({ items }) => {
  received += items.length;
  if (released) for (const { id, item } of items) answer(id, unchanged(item.path, 'after'));
  else held.push(...items);
  channel.postMessage({ threadId, received });
});
parentPort.postMessage({ ready: true });
`,
};

/** Writes the script of `mode` into `dir` and returns its URL, for the pool's `script` argument. */
export async function fakeWorkerScript(dir: string, mode: FakeWorkerMode): Promise<URL> {
  const path = join(dir, `fake-worker-${mode}.mjs`);
  await writeFile(path, PRELUDE + BODIES[mode]);
  return pathToFileURL(path);
}
