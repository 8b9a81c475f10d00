// The plan the tool makes for a file on disk, without writing it: the fuzzer asks for the same edit
// again, the kill campaign lists the states a kill can leave a file in.

import { FileByteSource } from '../../src/elf/byte-source.js';
import { readElfImage } from '../../src/elf/elf-image.js';
import { planEditOf, type EditOperations } from '../../src/edit/plan-file.js';
import type { Plan } from '../../src/plan/plan.js';

export async function planFile(path: string, operations: EditOperations): Promise<Plan> {
  const source = FileByteSource.open(path);
  try {
    return (await planEditOf(await readElfImage(source), operations)).plan;
  } finally {
    source.close();
  }
}
