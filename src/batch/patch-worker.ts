// A worker thread of the batch: it patches the files the pool sends it, a few at a time, and posts
// each outcome back. Errors travel as plain data and become CudaPatchelfErrors again in the pool.

import { parentPort, workerData } from 'node:worker_threads';
import { processFile, type FileItem, type FileOptions } from './patch-tree.js';
import { serializeOutcome } from './outcome-transfer.js';

const options = workerData as FileOptions;
parentPort?.on('message', (message: { id: number; item: FileItem }) => {
  void processFile(message.item, options).then((outcome) => parentPort?.postMessage({ id: message.id, outcome: serializeOutcome(outcome) }));
});
