// Spreads ELF files over worker threads, so that planning (JavaScript) uses more than one core; each
// file goes to the worker with the fewest in flight. Most files take about as long as a message
// between threads, so the files given in one turn of the event loop travel as one message, and a
// worker answers a batch with one. A worker that dies costs only the file in its hands: the others it
// held go to the other workers (docs/design.md says why that is safe, and patch-worker.ts how the pool
// knows), and a dead worker is replaced a few times per run. The pool starts no thread of itself: the
// scheduler grows it as ELF files queue up (schedule-files.ts).

import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import type { FileOutcome } from './file-outcome.js';
import { deserializeOutcome, type TransferredOutcome } from './outcome-transfer.js';
import type { FileItem, FileOptions } from './process-file.js';

const WORKER_SCRIPT = new URL('./patch-worker.cjs', import.meta.url);

/**
 * Workers started in place of dead ones, per run. One death is usually one file that breaks the thread
 * (that file fails and is not given to another); many in one run point at something that kills threads
 * whatever they work on (memory), where more threads would die the same way.
 */
const REPLACEMENTS = 3;

/** What a worker publishes in its `current` slot while it is between files. */
export const IDLE = -1;

/** What a worker thread starts with. */
export interface WorkerData {
  readonly options: FileOptions;
  /** One Int32 over a SharedArrayBuffer: the id of the file the thread is working on, or IDLE. */
  readonly current: Int32Array;
}

/** What the pool posts to a worker, and what the worker posts back. */
export interface WorkerBatch {
  readonly items: readonly { readonly id: number; readonly item: FileItem }[];
}
export interface WorkerBatchOutcomes {
  readonly outcomes: readonly { readonly id: number; readonly outcome: TransferredOutcome }[];
}
/** A worker's first message: its code is loaded, and a file sent to it now starts at once. */
export interface WorkerReady {
  readonly ready: true;
}

/** Workers run the compiled module; from TypeScript sources (tests) the batch stays in-process. */
export function workersAvailable(script: URL = WORKER_SCRIPT): boolean {
  return existsSync(fileURLToPath(script));
}

interface Job {
  readonly id: number;
  readonly item: FileItem;
  readonly resolve: (outcome: FileOutcome) => void;
}

/** How a thread ended, in words: its exit code and, after an uncaught exception, its first line. */
function howItDied(code: number, error: unknown): string {
  const message = error instanceof Error ? `${error.name}: ${error.message}` : error === undefined ? '' : String(error);
  const firstLine = message.split('\n', 1)[0] ?? '';
  return `exit code ${code}${firstLine === '' ? '' : `: ${firstLine}`}`;
}

/** One worker thread and the jobs it holds, unreported: queued here, posted, or being worked on. */
class PoolWorker {
  alive = true;
  /** Whether the thread has said it is loaded (WorkerReady). */
  ready = false;
  /** The uncaught exception that ended the thread, when one did ('exit' follows 'error'). */
  error: unknown = undefined;
  private readonly thread: Worker;
  private readonly current = new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
  private readonly jobs = new Map<number, Job>();
  private queued: Job[] = [];

  constructor(options: FileOptions, script: URL, onExit: (worker: PoolWorker, code: number) => void) {
    Atomics.store(this.current, 0, IDLE);
    this.thread = new Worker(script, { workerData: { options, current: this.current } satisfies WorkerData });
    this.thread.on('message', (message: WorkerBatchOutcomes | WorkerReady) => {
      if ('ready' in message) {
        this.ready = true;
        return;
      }
      for (const { id, outcome } of message.outcomes) {
        this.jobs.get(id)?.resolve(deserializeOutcome(outcome));
        this.jobs.delete(id);
      }
    });
    this.thread.on('error', (error) => {
      this.error = error;
    });
    // Node delivers every message the thread posted before 'exit': what is left in `jobs` is unreported.
    this.thread.on('exit', (code) => {
      this.alive = false;
      onExit(this, code);
    });
  }

  get load(): number {
    return this.jobs.size;
  }

  run(job: Job): void {
    if (this.queued.length === 0) setImmediate(() => this.flush());
    this.queued.push(job);
    this.jobs.set(job.id, job);
  }

  /**
   * After the thread exited: the job it died working on, and the others it held, which it had not
   * started or had only read (an outcome that may stand for a write is posted the moment it is known).
   */
  takeJobs(): { readonly victim: Job | undefined; readonly others: Job[] } {
    const current = Atomics.load(this.current, 0);
    const victim = this.jobs.get(current);
    this.jobs.delete(current);
    const others = [...this.jobs.values()];
    this.jobs.clear();
    this.queued = [];
    return { victim, others };
  }

  terminate(): Promise<number> {
    return this.thread.terminate();
  }

  private flush(): void {
    // A message to a thread that has exited is dropped: its jobs come back through takeJobs().
    if (!this.alive || this.queued.length === 0) return;
    const batch: WorkerBatch = { items: this.queued.map(({ id, item }) => ({ id, item })) };
    this.queued = [];
    this.thread.postMessage(batch);
  }
}

export class WorkerPool {
  private readonly workers: PoolWorker[] = [];
  private replacementsLeft = REPLACEMENTS;
  private deaths = 0;
  /** Threads started by growTo, at most maxThreads: a replacement for a dead one is not counted here. */
  private grown = 0;
  /** Threads started in this pool, replacements included. */
  started = 0;
  private closing = false;
  private nextId = 0;

  /** A pool of no thread yet: growTo starts them, up to maxThreads. `script`: what each thread runs. */
  constructor(
    private readonly options: FileOptions,
    private readonly maxThreads: number,
    private readonly script: URL = WORKER_SCRIPT,
  ) {}

  /**
   * Starts threads until `wanted` are running, never more than maxThreads in all (replacements aside):
   * the scheduler wants one per ELF file it has handed over and not had back.
   */
  growTo(wanted: number): void {
    while (this.grown < this.maxThreads && this.workers.length < wanted) {
      this.grown++;
      this.start();
    }
  }

  /** Whether a thread has loaded its code (a file sent before then waits for that). */
  get ready(): boolean {
    return this.workers.some((worker) => worker.ready);
  }

  run(item: FileItem): Promise<FileOutcome> {
    return new Promise((resolve) => this.dispatch({ id: this.nextId++, item, resolve }));
  }

  async close(): Promise<void> {
    this.closing = true;
    await Promise.all(this.workers.map((w) => w.terminate()));
  }

  private start(): void {
    this.started++;
    this.workers.push(new PoolWorker(this.options, this.script, (worker, code) => this.onExit(worker, code)));
  }

  private dispatch(job: Job): void {
    const least = this.workers.reduce<PoolWorker | undefined>((a, b) => (a === undefined || b.load < a.load ? b : a), undefined);
    if (least === undefined) {
      const message = `no worker thread is left to patch this file (${this.deaths} died in this run); left alone`;
      job.resolve({ path: job.item.path, status: 'failed', error: new CudaPatchelfError('stopped', message, { file: job.item.path }) });
      return;
    }
    least.run(job);
  }

  private onExit(dead: PoolWorker, code: number): void {
    this.workers.splice(this.workers.indexOf(dead), 1);
    if (this.closing) return;
    this.deaths++;
    const { victim, others } = dead.takeJobs();
    if (victim !== undefined) {
      // A thread dies between JavaScript steps, never inside a write: the file holds whole writes, in
      // the order that keeps it valid at every step (docs/design.md, How a file is edited), which the next run completes.
      const what = this.options.dryRun
        ? 'nothing was written'
        : 'the file is unchanged, part-way or fully patched (every write leaves it valid): run apply again to finish it';
      victim.resolve({
        path: victim.item.path,
        status: 'failed',
        error: new CudaPatchelfError('stopped', `the worker thread patching this file died (${howItDied(code, dead.error)}); ${what}`, {
          file: victim.item.path,
          cause: dead.error,
        }),
      });
    }
    if (this.replacementsLeft > 0) {
      this.replacementsLeft--;
      this.start();
    }
    for (const job of others) this.dispatch(job);
  }
}
