// Where each file of the batch is patched: in this thread, or in worker threads (worker-pool.ts).
//
// Measured on 16 cores with eight threads started with the first file against one thread
// (docs/benchmarks.md, Threads): starting the pool costs about 60 ms (PyTorch's 4 executables: 232 ms
// against 155 ms), and a file that is not ELF costs less here than the messages that send it to a
// worker and its outcome back (7,030 headers: 342 ms against 305 ms; `torch`, 11,678 files of which
// 17 large libraries: 677 ms against 496 ms). So with more than one thread, unless the pool is to
// start with the first file (`threadsFromStart`), this thread reads each file's first bytes: a file
// that is not ELF is done here, and an ELF file goes to the pool, which the first one starts. A tree
// without an ELF file starts no thread.

import type { FileOutcome } from './file-outcome.js';
import { processFile, sniffFile, type FileItem, type FileOptions } from './process-file.js';
import { WorkerPool, workersAvailable } from './worker-pool.js';

export class FileScheduler {
  private pool: WorkerPool | null = null;
  private readonly threaded: boolean;

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
    if (!this.threaded) return processFile(item, this.options);
    if (this.pool !== null && this.threadsFromStart) return this.pool.run(item);
    const notElf = await sniffFile(item);
    if (notElf !== null) return notElf;
    this.pool ??= new WorkerPool(this.jobs, this.options);
    return this.pool.run(item);
  }

  async close(): Promise<void> {
    await this.pool?.close();
  }
}
