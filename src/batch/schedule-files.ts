// Where each file of the batch is patched: in this thread, or in worker threads (worker-pool.ts).
//
// Measured on 16 cores with eight threads against one (docs/benchmarks.md, Threads): starting the pool
// costs about 60 ms (PyTorch's 4 executables, all through the pool: 239 ms against 176 ms), and a file
// that is not ELF costs less here than the messages that send it to a worker and its outcome back
// (`torch`, 11,678 files of which 17 libraries: 686 ms against 630 ms). So with more than one thread,
// this thread reads each file's first bytes, and:
// - a file that is not ELF, or a later name of a hard-linked ELF file (first-names.ts), is done here
//   (a tree without an ELF file starts no thread);
// - the first ELF file starts the pool, and while no thread has loaded, ELF files are patched here,
//   one after the other, so that a tree with little ELF work does not wait for the threads to load;
// - once one has, the ELF files, those still waiting here included, go to the pool.
// With `threadsFromStart`, the pool starts with the batch and gets every ELF file.

import type { FileOutcome } from './file-outcome.js';
import { FirstNames } from './first-names.js';
import { processFile, sniffFile, type FileItem, type FileOptions } from './process-file.js';
import { WorkerPool, workersAvailable } from './worker-pool.js';

/**
 * Lets the event loop run once: files run side by side in this thread with synchronous reads, and the
 * message of a thread that has loaded is handled only when the event loop turns.
 */
const eventLoopTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export class FileScheduler {
  private pool: WorkerPool | null = null;
  private readonly threaded: boolean;
  private readonly inodes = new FirstNames();
  /** Settles when the last ELF file given to this thread is done: they run one after the other. */
  private lastHere: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly options: FileOptions,
    private readonly jobs: number,
    private readonly threadsFromStart: boolean,
  ) {
    this.threaded = jobs > 1 && workersAvailable();
    if (this.threaded && threadsFromStart) this.pool = new WorkerPool(jobs, options);
  }

  /** Worker threads started so far (0 while every file ran in this thread). */
  get workerThreads(): number {
    return this.pool?.started ?? 0;
  }

  async run(item: FileItem): Promise<FileOutcome> {
    if (!this.threaded) return processFile(item, this.options, this.inodes);
    const skipped = sniffFile(item, this.inodes);
    if (skipped !== null) return skipped;
    const pool = (this.pool ??= new WorkerPool(this.jobs, this.options));
    if (pool.ready || this.threadsFromStart) return pool.run(item);
    const here = this.lastHere.then(async () => {
      await eventLoopTurn();
      return pool.ready ? null : processFile(item, this.options, this.inodes);
    });
    this.lastHere = here.catch(() => undefined);
    return (await here) ?? pool.run(item);
  }

  async close(): Promise<void> {
    await this.pool?.close();
  }
}
