// --base DIR: the rest of the driver link, kept under the driver's libraries. NixOS' /run/opengl-driver
// is a buildEnv of every graphics driver (Mesa's libraries and lib/dri, the Vulkan and EGL vendor files
// under share/): link-driver makes that link in its place, so it links each entry of DIR and of DIR/lib
// too, and the driver's and cuda_compat's libraries take the names they share.

import { statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { namesIn } from './release-files.js';

export interface BaseEntry {
  /** The path in the driver link: NAME, or lib/NAME. */
  readonly path: string;
  /** What it links to: the entry in DIR, through DIR (a buildEnv's entries are links themselves). */
  readonly target: string;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** Every entry of `dir` but lib, and every entry of `dir`/lib, as links of the driver link. */
export function readBaseEntries(dir: string): BaseEntry[] {
  const root = resolve(dir);
  const lib = join(root, 'lib');
  return [
    ...namesIn(root)
      .filter((name) => name !== 'lib')
      .map((name) => ({ path: name, target: join(root, name) })),
    ...(isDirectory(lib) ? namesIn(lib).map((name) => ({ path: `lib/${name}`, target: join(lib, name) })) : []),
  ];
}
