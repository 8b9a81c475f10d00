// Ctrl-C during a batch. The batch's thread raises a flag that every thread patching files reads
// before it starts a file and again before it writes one: a file is written whole or not at all, and
// the files after it are left untouched. The flag is one Int32 over a SharedArrayBuffer, so it reaches
// worker threads with their options and they see it the moment it is raised.

export type InterruptFlag = Int32Array;

export function newInterruptFlag(): InterruptFlag {
  return new Int32Array(new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT));
}

export function raiseInterrupt(flag: InterruptFlag): void {
  Atomics.store(flag, 0, 1);
}

export function isInterrupted(flag: InterruptFlag | undefined): boolean {
  return flag !== undefined && Atomics.load(flag, 0) !== 0;
}
