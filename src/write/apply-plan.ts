// Executes a plan: positional writes in the plan's order. It knows nothing of ELF; the order is what
// keeps every intermediate file valid (see plan.ts).

import type { FileHandle } from 'node:fs/promises';
import type { Plan } from '../plan/plan.js';

export interface ApplyOptions {
  /** fsync between phases, so that no header reaches the disk before the data it points at. */
  readonly durable?: boolean;
  /** Stop after this many writes (prefix testing). */
  readonly limit?: number;
}

export async function applyPlan(handle: FileHandle, plan: Plan, options: ApplyOptions = {}): Promise<number> {
  const writes = plan.writes.slice(0, options.limit ?? plan.writes.length);
  let written = 0;
  let phase = writes[0]?.phase;
  for (const write of writes) {
    if (options.durable && write.phase !== phase) await handle.sync();
    phase = write.phase;
    let done = 0;
    while (done < write.bytes.length) {
      const { bytesWritten } = await handle.write(write.bytes, done, write.bytes.length - done, write.offset + done);
      done += bytesWritten;
    }
    written += done;
  }
  if (options.durable && writes.length > 0) await handle.sync();
  return written;
}
