// Where each file of the batch is patched: in this thread until the ELF work done here shows that
// worker threads pay (threads-after.ts), then in the worker pool (worker-pool.ts). 0 starts the pool
// with the first file.

import type { FileOutcome } from './file-outcome.js';
import { processFile, type FileItem, type FileOptions } from './process-file.js';
import { WorkerPool, workersAvailable } from './worker-pool.js';

/** Files that only a sniff saw: they tell nothing about the work an ELF file takes. */
function isElfWork(outcome: FileOutcome): boolean {
  return !(outcome.status === 'skipped' && (outcome.reason === 'not-elf' || outcome.reason === 'archive'));
}

export class FileScheduler {
  private pool: WorkerPool | null = null;
  /** Wall time of the files patched in this thread that were ELF. */
  private elfWorkMs = 0;
  private readonly threaded: boolean;
  /**
   * Settles when the last file given to this thread is done. Until the pool starts, files run here one
   * after the other: their times then add up to the work, not to the work of the files interleaved with
   * them, and a file still waiting when the pool starts goes to the pool instead.
   */
  private previous: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly options: FileOptions,
    private readonly jobs: number,
    private readonly threadsAfterMs: number,
  ) {
    this.threaded = jobs > 1 && workersAvailable();
    if (this.threaded && threadsAfterMs <= 0) this.pool = new WorkerPool(jobs, options);
  }

  run(item: FileItem): Promise<FileOutcome> {
    if (this.pool !== null) return this.pool.run(item);
    if (!this.threaded) return processFile(item, this.options);
    const here = this.previous.then(() => (this.pool === null ? this.inThisThread(item) : null));
    this.previous = here.catch(() => undefined);
    return here.then((outcome) => outcome ?? this.poolRun(item));
  }

  /** Worker threads started so far (0 while every file ran in this thread). */
  get workerThreads(): number {
    return this.pool?.started ?? 0;
  }

  async close(): Promise<void> {
    await this.pool?.close();
  }

  private async inThisThread(item: FileItem): Promise<FileOutcome> {
    const started = performance.now();
    const outcome = await processFile(item, this.options);
    if (isElfWork(outcome)) this.elfWorkMs += performance.now() - started;
    if (this.pool === null && this.elfWorkMs >= this.threadsAfterMs) this.pool = new WorkerPool(this.jobs, this.options);
    return outcome;
  }

  private poolRun(item: FileItem): Promise<FileOutcome> {
    if (this.pool === null) throw new Error('FileScheduler: a file was left for a pool that did not start');
    return this.pool.run(item);
  }
}
