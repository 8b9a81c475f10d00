// Spreads files over worker threads so that planning (JavaScript) uses every core, not just the one
// the main thread runs on. Each worker gets the next files when it has the fewest in flight.
//
// Files travel in batches: most files of a tree take tens of microseconds (a sniff and a skip), the
// same order as a message between threads, so the pool sends what it was given in one turn of the
// event loop as one message, and a worker answers a batch with one message.

import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { FileOutcome } from './file-outcome.js';
import { deserializeOutcome, type TransferredOutcome } from './outcome-transfer.js';
import type { FileItem, FileOptions } from './patch-tree.js';

const WORKER_SCRIPT = new URL('./patch-worker.js', import.meta.url);

/** What the pool posts to a worker, and what the worker posts back. */
export interface WorkerBatch {
  readonly items: readonly { readonly id: number; readonly item: FileItem }[];
}
export interface WorkerBatchOutcomes {
  readonly outcomes: readonly { readonly id: number; readonly outcome: TransferredOutcome }[];
}

/** Workers run the compiled module; from TypeScript sources (tests) the batch stays in-process. */
export function workersAvailable(): boolean {
  return existsSync(fileURLToPath(WORKER_SCRIPT));
}

interface Waiting {
  readonly path: string;
  readonly resolve: (outcome: FileOutcome) => void;
}

class PoolWorker {
  readonly waiting = new Map<number, Waiting>();
  private readonly worker: Worker;
  private queued: { id: number; item: FileItem }[] = [];

  constructor(options: FileOptions) {
    this.worker = new Worker(WORKER_SCRIPT, { workerData: options });
    this.worker.on('message', (message: WorkerBatchOutcomes) => {
      for (const { id, outcome } of message.outcomes) {
        this.waiting.get(id)?.resolve(deserializeOutcome(outcome));
        this.waiting.delete(id);
      }
    });
    // A worker that dies fails the files it had; the others go on.
    this.worker.on('error', (error) => {
      for (const { path, resolve } of this.waiting.values()) resolve({ path, status: 'failed', error });
      this.waiting.clear();
    });
  }

  run(id: number, item: FileItem): Promise<FileOutcome> {
    if (this.queued.length === 0) setImmediate(() => this.flush());
    this.queued.push({ id, item });
    return new Promise((resolve) => this.waiting.set(id, { path: item.path, resolve }));
  }

  terminate(): Promise<number> {
    return this.worker.terminate();
  }

  private flush(): void {
    const batch: WorkerBatch = { items: this.queued };
    this.queued = [];
    this.worker.postMessage(batch);
  }
}

export class WorkerPool {
  private readonly workers: PoolWorker[];
  private nextId = 0;

  constructor(size: number, options: FileOptions) {
    this.workers = Array.from({ length: size }, () => new PoolWorker(options));
  }

  run(item: FileItem): Promise<FileOutcome> {
    const least = this.workers.reduce((a, b) => (b.waiting.size < a.waiting.size ? b : a));
    return least.run(this.nextId++, item);
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()));
  }
}
