// Runs a CommonJS bundle through V8's code cache: the cache holds the bytecode of the bundle's top
// level and of every function one representative run compiled, and V8 takes it instead of compiling
// the bundle again. V8 checks it before use: a cache from another Node or V8 version, other V8 flags,
// or a bundle of another length is rejected, and the bundle is compiled as if there were none. A
// missing or unreadable cache costs the same.

import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { Script } from 'node:vm';

/** Where the cache of a bundle lives: beside it. */
function codeCachePath(bundle: string): string {
  return `${bundle}.code-cache`;
}

function readCodeCache(bundle: string): Buffer | undefined {
  try {
    return readFileSync(codeCachePath(bundle));
  } catch {
    return undefined;
  }
}

/**
 * The bundle compiled as a CommonJS module is (Node's own module wrapper), with its cache when there
 * is one. The wrapper opens on the bundle's first line, so line numbers in stack traces stay the
 * bundle's (and its source map's).
 */
export function compileBundle(bundle: string): Script {
  const source = readFileSync(bundle, 'utf8');
  return new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {
    filename: bundle,
    cachedData: readCodeCache(bundle),
  });
}

/** Runs a compiled bundle as Node would run the module. */
export function runBundle(script: Script, bundle: string): void {
  const run = script.runInThisContext() as (
    exports: object,
    require: NodeJS.Require,
    module: object,
    filename: string,
    dirname: string,
  ) => void;
  const module = { exports: {} };
  run(module.exports, createRequire(bundle), module, bundle, dirname(bundle));
}

/** Writes the cache of a compiled bundle, with every function compiled so far. */
export function writeCodeCache(script: Script, bundle: string): void {
  writeFileSync(codeCachePath(bundle), script.createCachedData());
}
