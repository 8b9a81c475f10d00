#!/usr/bin/env node
// The installed command: runs the CLI bundle (main.cjs, built from cli/main.ts) through V8's code
// cache (code-cache.ts). Compiling the bundle is most of what a single-file command costs above Node's
// own start-up (docs/benchmarks.md, Start-up).
//
// The build writes the cache (`npm run build:code-cache`): a dry-run `add-runpath` on the Node binary
// itself, run with CUDA_PATCHELF_WRITE_CODE_CACHE set, by the Node that built the bundle (the file is
// always there, also in a build from the sources alone).

import { fileURLToPath } from 'node:url';
import { compileBundle, runBundle, writeCodeCache } from './code-cache.js';

const BUNDLE = fileURLToPath(new URL('./main.cjs', import.meta.url));

const script = compileBundle(BUNDLE);
if (process.env.CUDA_PATCHELF_WRITE_CODE_CACHE !== undefined) {
  // At exit, so that the functions the run compiled are in the cache too.
  process.on('exit', () => writeCodeCache(script, BUNDLE));
}
runBundle(script, BUNDLE);
