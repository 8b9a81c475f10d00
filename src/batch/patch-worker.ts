// A worker thread of the batch: it patches the files of the batches the pool sends it, one file after
// the other, and posts each batch's outcomes back in one message. Errors travel as plain data and
// become CudaPatchelfErrors again in the pool.
//
// For the pool to know what a dead thread leaves behind (worker-pool.ts), the thread publishes the id
// of the file it is working on, and posts an outcome that may stand for a write the moment it has it:
// a file that was written must not be given to another thread (under nixpkgs-compat a second patch
// prepends the directories again), while a file that was only read can be read again.

import { parentPort, workerData } from 'node:worker_threads';
import type { FileOutcome } from './file-outcome.js';
import { processFile } from './process-file.js';
import { serializeOutcome } from './outcome-transfer.js';
import { IDLE, type WorkerBatch, type WorkerBatchOutcomes, type WorkerData, type WorkerReady } from './worker-pool.js';

const { options, current } = workerData as WorkerData;
const batches: WorkerBatch[] = [];

function mayHaveWritten(outcome: FileOutcome): boolean {
  return outcome.status === 'failed' || (outcome.status === 'patched' && !options.dryRun);
}

async function patchBatches(): Promise<void> {
  for (let batch = batches[0]; batch !== undefined; batches.shift(), batch = batches[0]) {
    let outcomes: WorkerBatchOutcomes['outcomes'][number][] = [];
    for (const { id, item } of batch.items) {
      Atomics.store(current, 0, id);
      const outcome = await processFile(item, options);
      Atomics.store(current, 0, IDLE);
      outcomes.push({ id, outcome: serializeOutcome(outcome) });
      if (mayHaveWritten(outcome)) {
        parentPort?.postMessage({ outcomes } satisfies WorkerBatchOutcomes);
        outcomes = [];
      }
    }
    if (outcomes.length > 0) parentPort?.postMessage({ outcomes } satisfies WorkerBatchOutcomes);
  }
}

// One file at a time, so that `current` names the only file in the thread's hands: a batch that
// arrives while another is being patched waits for it.
parentPort?.on('message', (batch: WorkerBatch) => {
  batches.push(batch);
  if (batches.length === 1) void patchBatches();
});
parentPort?.postMessage({ ready: true } satisfies WorkerReady);
