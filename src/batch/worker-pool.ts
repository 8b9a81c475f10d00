// Spreads files over worker threads so that planning (JavaScript) uses every core, not just the one
// the main thread runs on. Each worker gets the next file when it has the fewest in flight.

import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { FileOutcome } from './file-outcome.js';
import { deserializeOutcome, type TransferredOutcome } from './outcome-transfer.js';
import type { FileItem, FileOptions } from './patch-tree.js';

const WORKER_SCRIPT = new URL('./patch-worker.js', import.meta.url);

/** Workers run the compiled module; from TypeScript sources (tests) the batch stays in-process. */
export function workersAvailable(): boolean {
  return existsSync(fileURLToPath(WORKER_SCRIPT));
}

export class WorkerPool {
  private readonly workers: { worker: Worker; waiting: Map<number, { path: string; resolve: (outcome: FileOutcome) => void }> }[];
  private nextId = 0;

  constructor(size: number, options: FileOptions) {
    this.workers = Array.from({ length: size }, () => {
      const entry = { worker: new Worker(WORKER_SCRIPT, { workerData: options }), waiting: new Map<number, { path: string; resolve: (outcome: FileOutcome) => void }>() };
      entry.worker.on('message', (message: { id: number; outcome: TransferredOutcome }) => {
        entry.waiting.get(message.id)?.resolve(deserializeOutcome(message.outcome));
        entry.waiting.delete(message.id);
      });
      // A worker that dies fails the files it had; the others go on.
      entry.worker.on('error', (error) => {
        for (const { path, resolve } of entry.waiting.values()) resolve({ path, status: 'failed', error });
        entry.waiting.clear();
      });
      return entry;
    });
  }

  run(item: FileItem): Promise<FileOutcome> {
    const entry = this.workers.reduce((least, w) => (w.waiting.size < least.waiting.size ? w : least));
    const id = this.nextId++;
    return new Promise((resolve) => {
      entry.waiting.set(id, { path: item.path, resolve });
      entry.worker.postMessage({ id, item });
    });
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.worker.terminate()));
  }
}
