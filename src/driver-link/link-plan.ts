// What the driver link holds, as links relative to it: lib/NAME for each name of each library of the
// chosen cuda_compat, then of the driver, then the entries of --base; a name taken by an earlier one is
// not linked again, so compat's libraries (libcuda first) replace the driver's of the same name, and
// both replace the base's. Pure: the libraries and entries come in read.

import type { BaseEntry } from './base-entries.js';
import type { LibraryLinks } from './library-links.js';

export type LinkSource = 'compat' | 'driver' | 'base';

export interface PlannedLink {
  /** Relative to the driver link: lib/libcuda.so.1, or a --base entry's NAME. */
  readonly path: string;
  /** An absolute path. */
  readonly target: string;
  readonly from: LinkSource;
}

/** The links, compat's first, then the driver's, then the base's, each in the order given. */
export function planLinks(compat: readonly LibraryLinks[], driver: readonly LibraryLinks[], base: readonly BaseEntry[]): PlannedLink[] {
  const libraries = (from: LinkSource, list: readonly LibraryLinks[]): PlannedLink[] =>
    list.flatMap((library) => library.names.map((name) => ({ path: `lib/${name}`, target: library.file, from })));
  const taken = new Set<string>();
  const links: PlannedLink[] = [];
  for (const link of [
    ...libraries('compat', compat),
    ...libraries('driver', driver),
    ...base.map((entry) => ({ ...entry, from: 'base' as const })),
  ]) {
    if (taken.has(link.path)) continue;
    taken.add(link.path);
    links.push(link);
  }
  return links;
}
