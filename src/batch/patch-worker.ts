// A worker thread of the batch: it patches the files of each batch the pool sends it, one after the
// other (its reads and writes are synchronous), and posts the batch's outcomes back in one message.
// Errors travel as plain data and become CudaPatchelfErrors again in the pool.

import { parentPort, workerData } from 'node:worker_threads';
import { processFile, type FileOptions } from './patch-tree.js';
import { serializeOutcome } from './outcome-transfer.js';
import type { WorkerBatch, WorkerBatchOutcomes } from './worker-pool.js';

const options = workerData as FileOptions;
parentPort?.on('message', (batch: WorkerBatch) => {
  void (async () => {
    const outcomes: WorkerBatchOutcomes['outcomes'][number][] = [];
    for (const { id, item } of batch.items) outcomes.push({ id, outcome: serializeOutcome(await processFile(item, options)) });
    parentPort?.postMessage({ outcomes } satisfies WorkerBatchOutcomes);
  })();
});
