// Where each file of the batch is patched: in this thread, or in worker threads (worker-pool.ts).
// This thread sniffs every file, as the walk lists it: a file that is not ELF (or a later name of a
// hard-linked one, first-names.ts) costs less here than the messages to a worker and back, and a
// thread costs tens of milliseconds and megabytes to start. So threads start for ELF files only, one
// per ELF file handed over and not done, never more than the CPUs; the ELF files met before a thread
// has loaded wait for it, or are patched here when the walk ends first. The walk is synchronous, so
// with threads it lets the event loop turn every few milliseconds, for their messages to be heard.
// The measurements behind these rules are in docs/benchmarks.md (Threads, and the --jobs cap).

import pLimit, { type LimitFunction } from 'p-limit';
import type { FileOutcome } from './file-outcome.js';
import { FirstNames } from './first-names.js';
import { processFile, skippedOutcome, type FileItem, type FileOptions } from './process-file.js';
import { recallWalkedFile, sniffWalkedFile } from './walked-file.js';
import { WorkerPool, workersAvailable } from './worker-pool.js';

/** Lets the event loop run once. */
const eventLoopTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** With threads, the walk lets the event loop turn at least this often (see above). */
const TURN_EVERY_MS = 2;

/**
 * Files handed to the pool and not yet done, per thread, at most: enough to outlast a message round
 * trip, few enough that the threads' queues stay balanced.
 */
const FILES_QUEUED_PER_JOB = 32;

/** A file taken: its outcome, or the pool's promise of it. */
export type TakenFile = { readonly outcome: FileOutcome } | { readonly later: Promise<FileOutcome> };

/** An ELF file met before a thread of the pool has loaded. */
interface WaitingFile {
  readonly item: FileItem;
  readonly resolve: (outcome: Promise<FileOutcome>) => void;
}

/** The most threads that patch files at once: --jobs, never more than the CPUs (a thread keeps more than one core busy). */
function threadLimit(jobs: number, cpuCount: number): number {
  return Math.max(1, Math.min(jobs, cpuCount));
}

export class FileScheduler {
  private pool: WorkerPool | null = null;
  private waiting: WaitingFile[] = [];
  /** ELF files handed over (waiting, or sent to the pool) whose outcome has not come back. */
  private queued = 0;
  readonly maxThreads: number;
  private readonly threaded: boolean;
  private readonly inodes = new FirstNames();
  private readonly limit: LimitFunction;
  private lastTurn = performance.now();

  /** `workerScript`: what the worker threads run (worker-pool.ts: the bundled patch-worker by default). */
  constructor(
    private readonly options: FileOptions,
    jobs: number,
    cpuCount: number,
    private readonly threadsFromStart: boolean,
    private readonly workerScript?: URL,
  ) {
    this.maxThreads = threadLimit(jobs, cpuCount);
    // A limit of one is this thread's: a single worker would add its start to the same work.
    this.threaded = this.maxThreads > 1 && workersAvailable(workerScript);
    if (this.threaded && threadsFromStart) {
      this.pool = new WorkerPool(options, this.maxThreads, workerScript);
      this.pool.growTo(this.maxThreads);
    }
    this.limit = pLimit(this.maxThreads * FILES_QUEUED_PER_JOB);
  }

  /** Worker threads started so far (0 while every file ran in this thread). */
  get workerThreads(): number {
    return this.pool?.started ?? 0;
  }

  /**
   * The next file of the walk: a file done in this thread is done when this resolves (the walk waits
   * for it); one for the pool comes back at once, with the promise of its outcome.
   */
  async take(item: FileItem): Promise<TakenFile> {
    if (this.threaded && performance.now() - this.lastTurn >= TURN_EVERY_MS) {
      await eventLoopTurn();
      this.lastTurn = performance.now();
      if (this.pool?.ready === true) this.sendWaiting(this.pool);
    }
    // A file the resolver's first phase read is told apart without opening it again.
    const sniffed = item.head === undefined ? sniffWalkedFile(item.path, this.inodes) : recallWalkedFile(item.path, item.head, this.inodes);
    if (sniffed?.kind === 'skipped') return { outcome: skippedOutcome(item.path, sniffed) };
    if (sniffed?.kind === 'failed') return { outcome: { path: item.path, status: 'failed', error: sniffed.error } };
    // An ELF file, open (or, known from the resolver's first phase, null: it is opened to be planned).
    if (!this.threaded)
      return { outcome: await processFile(item, this.options, { inodes: this.inodes, ...(sniffed === null ? {} : { opened: sniffed }) }) };
    sniffed?.source.close();
    this.pool ??= new WorkerPool(this.options, this.maxThreads, this.workerScript);
    const pool = this.pool;
    this.queued++;
    pool.growTo(this.queued);
    const outcome = this.waitOrSend(pool, item);
    return {
      later: outcome.then((done) => {
        this.queued--;
        return done;
      }),
    };
  }

  /** An ELF file waits for a thread to load, or goes to the pool once one has. */
  private waitOrSend(pool: WorkerPool, item: FileItem): Promise<FileOutcome> {
    if (!pool.ready && !this.threadsFromStart) return new Promise((resolve) => this.waiting.push({ item, resolve }));
    this.sendWaiting(pool);
    return this.toPool(pool, item);
  }

  /**
   * After the walk: the ELF files still waiting for a thread to load go to the pool once one has, and
   * until then are patched here, one after the other.
   */
  async finish(): Promise<void> {
    const pool = this.pool;
    if (pool === null) return;
    while (this.waiting.length > 0 && !pool.ready) {
      await eventLoopTurn();
      const next = pool.ready ? undefined : this.waiting.shift();
      if (next === undefined) break;
      const outcome = processFile(next.item, this.options, { inodes: this.inodes });
      next.resolve(outcome);
      await outcome;
    }
    this.sendWaiting(pool);
  }

  private sendWaiting(pool: WorkerPool): void {
    for (const { item, resolve } of this.waiting) resolve(this.toPool(pool, item));
    this.waiting = [];
  }

  private toPool(pool: WorkerPool, item: FileItem): Promise<FileOutcome> {
    return this.limit(() => pool.run(item));
  }

  async close(): Promise<void> {
    await this.pool?.close();
  }
}
