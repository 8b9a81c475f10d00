// A temporary directory for the tests of a file or a describe block: made before them, removed after.

import { rm } from 'node:fs/promises';
import { afterAll, beforeAll } from 'vitest';
import { makeTempDir } from './temp-dir.js';

/** Registers the hooks (the directory under `parent`, as makeTempDir makes it); the function it returns gives the directory once the tests run. */
export function useTempDir(label: string, parent?: string): () => string {
  let dir: string | undefined;
  beforeAll(async () => {
    dir = await makeTempDir(label, parent);
  });
  afterAll(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });
  return () => {
    if (dir === undefined) throw new Error(`the ${label} directory is made in beforeAll`);
    return dir;
  };
}
