// A watchdog for in-process loops over untrusted input: a synchronous infinite loop blocks the event
// loop, so no timer of the test itself can fire. A worker thread watches a shared heartbeat instead and,
// when it stops, writes what was being processed to stderr and kills the process, so that the test run
// fails with the input that hung rather than hanging CI.

import { Worker } from 'node:worker_threads';

const NOTE_BYTES = 4096;

const WATCHER = `
const { workerData } = require('node:worker_threads');
const { writeSync } = require('node:fs');
const beat = new Int32Array(workerData.beat);
const note = new Uint8Array(workerData.note);
let last = -1;
let since = Date.now();
setInterval(() => {
  const now = Atomics.load(beat, 0);
  if (now !== last) {
    last = now;
    since = Date.now();
    return;
  }
  if (Date.now() - since < workerData.limitMs) return;
  const length = Atomics.load(beat, 1);
  const text = Buffer.from(note.subarray(0, length)).toString('utf8');
  writeSync(2, '\\nwatchdog: no progress for ' + workerData.limitMs + ' ms; stuck on: ' + text + '\\n');
  process.kill(process.pid, 'SIGKILL');
}, 50);
`;

export class Watchdog {
  private readonly beat: Int32Array;
  private readonly note: Uint8Array;
  private readonly worker: Worker;
  private readonly encoder = new TextEncoder();

  constructor(limitMs: number) {
    const beat = new SharedArrayBuffer(8);
    const note = new SharedArrayBuffer(NOTE_BYTES);
    this.beat = new Int32Array(beat);
    this.note = new Uint8Array(note);
    this.worker = new Worker(WATCHER, { eval: true, workerData: { beat, note, limitMs } });
    this.worker.unref();
  }

  /** Marks progress and records what is processed next (shown if it never finishes). */
  pet(what: string): void {
    const { written } = this.encoder.encodeInto(what, this.note);
    Atomics.store(this.beat, 1, written);
    Atomics.add(this.beat, 0, 1);
  }

  async stop(): Promise<void> {
    await this.worker.terminate();
  }
}
