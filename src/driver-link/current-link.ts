// What the driver link is now. link-driver keeps DEST as a symbolic link to a generation directory
// beside it (.NAME-gen-XXXXXX, holding lib/ and the links), so that one rename(2) of a new link over
// DEST switches every program that starts afterwards to the next generation at once. DEST may also be a
// link made by something else (NixOS' graphics module links it to a store path), which link-driver
// replaces, or nothing yet; a directory or a file there is not link-driver's to replace.

import { lstatSync, readdirSync, readlinkSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { describeFileType, ioError } from '../errors/io-error.js';
import type { PlannedLink } from './link-plan.js';

export type CurrentLink =
  | { readonly kind: 'none' }
  /** A generation of link-driver's: its name, and its links (path → target; a path that is not a link maps to null). */
  | { readonly kind: 'generation'; readonly generation: string; readonly links: ReadonlyMap<string, string | null> }
  /** A symbolic link made by something else. */
  | { readonly kind: 'foreign'; readonly target: string }
  /** Something that is not a symbolic link, in words. */
  | { readonly kind: 'not-a-link'; readonly what: string };

/** `.NAME-gen-`: the start of the names of DEST's generation directories (mkdtemp adds six characters). */
export function generationPrefix(dest: string): string {
  return `.${basename(dest)}-gen-`;
}

/** `.NAME-link-`: the start of the names of the links made to be renamed over DEST. */
export function pendingLinkPrefix(dest: string): string {
  return `.${basename(dest)}-link-`;
}

/** The links under `dir` (relative path → target), one level into lib/; anything that is not a link maps to null. */
function linksUnder(dir: string): Map<string, string | null> {
  const links = new Map<string, string | null>();
  const visit = (relative: string): void => {
    for (const name of readdirSync(join(dir, relative))) {
      const path = relative === '' ? name : `${relative}/${name}`;
      const stats = lstatSync(join(dir, path));
      if (path === 'lib' && stats.isDirectory()) visit(path);
      else links.set(path, stats.isSymbolicLink() ? readlinkSync(join(dir, path)) : null);
    }
  };
  visit('');
  return links;
}

/** What DEST is now; an io error when it cannot be told (its directory cannot be read). */
export function readCurrentLink(dest: string): CurrentLink {
  let stats: ReturnType<typeof lstatSync>;
  try {
    stats = lstatSync(dest);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'none' };
    throw ioError(dest, 'look at it', error);
  }
  if (!stats.isSymbolicLink()) return { kind: 'not-a-link', what: describeFileType(stats) };
  const target = readlinkSync(dest);
  const ours = !target.includes('/') && target.startsWith(generationPrefix(dest));
  if (!ours) return { kind: 'foreign', target };
  try {
    return { kind: 'generation', generation: target, links: linksUnder(join(dirname(dest), target)) };
  } catch {
    // A generation that is gone or cannot be read holds nothing: the next one replaces it.
    return { kind: 'generation', generation: target, links: new Map() };
  }
}

/** Whether DEST is a generation that holds exactly the planned links (and lib/). */
export function holdsPlan(current: CurrentLink, plan: readonly PlannedLink[]): boolean {
  if (current.kind !== 'generation') return false;
  return current.links.size === plan.length && plan.every((link) => current.links.get(link.path) === link.target);
}
