// Ctrl-C during a batch. The batch's thread raises a flag that every thread patching files reads
// before it starts a file and again before it writes one: a file is written whole or not at all, and
// the files after it are left untouched. The flag is one Int32 over a SharedArrayBuffer, so it reaches
// worker threads with their options and they see it the moment it is raised.

import { setImmediate as eventLoopTurn } from 'node:timers/promises';

export type InterruptFlag = Int32Array;

/** How often, at most, a synchronous loop lets a Ctrl-C be heard (a turn of the event loop costs microseconds). */
const INTERRUPT_CHECK_MS = 20;

export function newInterruptFlag(): InterruptFlag {
  return new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
}

export function raiseInterrupt(flag: InterruptFlag): void {
  Atomics.store(flag, 0, 1);
}

export function isInterrupted(flag: InterruptFlag | undefined): boolean {
  return flag !== undefined && Atomics.load(flag, 0) !== 0;
}

/**
 * Ctrl-C for a loop whose steps are synchronous (the walk, phase 1's reads): the signal is delivered
 * only when the event loop turns, which awaiting promises that are already settled never lets it do.
 * `interrupted()` gives it a turn every INTERRUPT_CHECK_MS at most, and says whether the flag is up.
 */
export class InterruptPoll {
  private lastTurn = performance.now();

  constructor(private readonly flag: InterruptFlag | undefined) {}

  async interrupted(): Promise<boolean> {
    if (this.flag === undefined) return false;
    if (performance.now() - this.lastTurn >= INTERRUPT_CHECK_MS) {
      await eventLoopTurn();
      this.lastTurn = performance.now();
    }
    return isInterrupted(this.flag);
  }
}
