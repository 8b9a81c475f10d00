// A plan's writes at their offsets of an open file, in the plan's order (the last step of commit-plan.ts,
// output-file.ts and rewrite-file.ts). It knows nothing of ELF; the order is what keeps every
// intermediate file valid (see plan.ts). The writes are synchronous system calls: a plan
// is a few small writes, for which a thread-pool round trip each costs more than the write itself.

import { fsyncSync, ftruncateSync, writeSync } from 'node:fs';
import type { Plan, PlannedWrite } from '../plan/plan.js';

export interface WriteAtOffsetsOptions {
  /** fsync between phases, so that no header reaches the disk before the data it points at. */
  readonly durable?: boolean;
  /** Stop after this many writes (prefix testing). */
  readonly limit?: number;
}

/** Writes the plan's writes at their offsets of the open file descriptor `fd`; returns the number of bytes written. */
export function writeAtOffsets(fd: number, plan: Plan, options: WriteAtOffsetsOptions = {}): number {
  const writes = plan.writes.slice(0, options.limit ?? plan.writes.length);
  let written = 0;
  let phase = writes[0]?.phase;
  for (const write of joinAdjacent(writes)) {
    if (options.durable && write.phase !== phase) fsyncSync(fd);
    phase = write.phase;
    let done = 0;
    while (done < write.bytes.length) {
      done += writeSync(fd, write.bytes, done, write.bytes.length - done, write.offset + done);
    }
    written += done;
  }
  // Bytes written past the final size (an interim table) go once everything else is in place.
  if (writes.length === plan.writes.length && writes.some((write) => write.offset + write.bytes.length > plan.newSize))
    ftruncateSync(fd, plan.newSize);
  if (options.durable && writes.length > 0) fsyncSync(fd);
  return written;
}

/**
 * The writes with each run of the same phase that follows on in the file (the next starts where the
 * one before it ends: section headers side by side, say) joined into one: one system call instead of
 * several. A write cut short by a kill stops part-way through, lowest offsets first, so the joined
 * write leaves the states the separate writes in their order would, and no other.
 */
export function joinAdjacent(writes: readonly PlannedWrite[]): PlannedWrite[] {
  const joined: PlannedWrite[] = [];
  for (let i = 0; i < writes.length; ) {
    const first = writes[i] as PlannedWrite;
    let end = i + 1;
    let size = first.bytes.length;
    for (
      let next = writes[end];
      next !== undefined && next.phase === first.phase && next.offset === first.offset + size;
      next = writes[++end]
    )
      size += next.bytes.length;
    if (end === i + 1) {
      joined.push(first);
    } else {
      const bytes = new Uint8Array(size);
      for (let at = 0, k = i; k < end; k++) {
        const part = (writes[k] as PlannedWrite).bytes;
        bytes.set(part, at);
        at += part.length;
      }
      joined.push({ ...first, bytes, what: `${end - i} writes from ${first.what}` });
    }
    i = end;
  }
  return joined;
}
