// The loader's view of one file: what it opens with the anchor's result and with ours
// (loader-list.ts), against what each side chose (compare.ts has the classes):
// - every library we chose for a DT_NEEDED entry must be opened from the copy we chose; otherwise the
//   difference is unexpected (ours would load another library than its report says);
// - a library the anchor chose that the loader opens from elsewhere with the anchor's result:
//   anchor-shadows;
// - a library opened from different places (two paths to the same bytes are one library): the class of the rule behind the two choices, or, when
//   another object of the tree asked for it first (that object decides which copy the process gets),
//   that object's class for it, the object being compared as a file of its own;
// - a file that loads with the anchor's result and not with ours: unexpected, unless we refused it.

import { basename, join } from 'node:path';
import {
  choiceClass,
  choiceOf,
  type CompareContext,
  type Difference,
  type DifferenceClass,
  type FileView,
  ownDirectories,
} from './compare.js';
import { libraryIn, sameLibrary } from './library-files.js';
import { type LoaderListing, loadsFully } from './loader-list.js';
import { unmask } from './read-back.js';

export interface Listings {
  readonly anchor: LoaderListing;
  readonly ours: LoaderListing;
}

/** A path the loader gave, `<tree>/...` inside the copy, so that the two copies compare. */
export const where = (path: string | null | undefined, copy: string): string | null =>
  path === null || path === undefined ? null : path.startsWith(`${copy}/`) ? `<tree>/${path.slice(copy.length + 1)}` : path;

/**
 * The class of a library's difference in the listings of `requester` (`<tree>/...`), the object that
 * asked for it first, when that object's own listings open it from the same two places; else null.
 */
export type RequesterClass = (
  requester: string,
  name: string,
  paths: { readonly anchor: string | null; readonly ours: string | null },
) => DifferenceClass | null;

export interface LoadedComparison {
  readonly differences: readonly Difference[];
  /** The class of each library the two results open from different places, or the anchor's from another copy than it chose. */
  readonly byName: ReadonlyMap<string, DifferenceClass>;
}

/** Whether the loader opened the copy a side chose in `dir`; null when the side chose none. */
function opensChosen(loaded: string | null | undefined, dir: string | null, copy: string, name: string, like: string): boolean | null {
  if (dir === null) return null;
  const chosen = libraryIn(unmask(dir, copy), basename(name), like);
  return loaded !== null && loaded !== undefined && chosen !== null && sameLibrary(loaded, chosen);
}

export function compareLoaded(
  anchor: FileView,
  ours: FileView,
  listings: Listings,
  requesterClass: RequesterClass,
  context: CompareContext,
): LoadedComparison {
  const file = anchor.path;
  const self = `<tree>/${file}`;
  const own = ownDirectories(ours, context);
  const like = join(context.oursCopy, file);
  const differences: Difference[] = [];
  const byName = new Map<string, DifferenceClass>();
  const push = (name: string, cls: DifferenceClass, detail: string): void => {
    differences.push({ file, what: 'loader', class: cls, detail: `${name}: ${detail}` });
    if (!byName.has(name)) byName.set(name, cls);
  };
  const names = new Set([...listings.anchor.libraries.keys(), ...listings.ours.libraries.keys()]);
  for (const name of names) {
    const raw = { anchor: listings.anchor.libraries.get(name), ours: listings.ours.libraries.get(name) };
    const [a, o] = [where(raw.anchor, context.anchorCopy), where(raw.ours, context.oursCopy)];
    const requester = {
      anchor: where(listings.anchor.requesters.get(name), context.anchorCopy),
      ours: where(listings.ours.requesters.get(name), context.oursCopy),
    };
    const paths = `anchor ${a ?? 'not found'}, ours ${o ?? 'not found'}`;
    // Two paths to one library (a link, or a byte-identical copy) are no other copy, as the resolver counts them.
    const same = a === o || (typeof raw.anchor === 'string' && typeof raw.ours === 'string' && sameLibrary(raw.anchor, raw.ours));
    if (requester.anchor !== self && requester.ours !== self) {
      if (same) continue;
      const through =
        requester.ours !== null && requester.anchor === requester.ours
          ? requesterClass(requester.ours, name, { anchor: a, ours: o })
          : null;
      push(
        name,
        through ?? 'unexpected',
        `${paths}, asked for first by ${requester.ours ?? 'nothing'} (the anchor's: ${requester.anchor ?? 'nothing'})`,
      );
      continue;
    }
    const dirs = { anchor: choiceOf(anchor, name), ours: choiceOf(ours, name) };
    const oursOpens = ours.failed === null ? opensChosen(raw.ours, dirs.ours, context.oursCopy, name, like) : null;
    const anchorOpens = opensChosen(raw.anchor, dirs.anchor, context.anchorCopy, name, join(context.anchorCopy, file));
    if (oursOpens === false) push(name, 'unexpected', `ours chose ${dirs.ours}, the loader opens ${o ?? 'nothing'}`);
    if (anchorOpens === false)
      push(
        name,
        'anchor-shadows',
        `the anchor chose ${dirs.anchor}, its result makes the loader open ${a ?? 'nothing'}; ours opens ${o ?? 'nothing'}`,
      );
    if (same || oursOpens === false || anchorOpens === false) continue;
    if (ours.failed !== null) {
      push(name, 'refused', `${paths}: ours did not write the file`);
      continue;
    }
    const why = choiceClass(name, dirs, own, context, like);
    push(name, why?.class ?? 'unexpected', `${paths}${why === null ? '' : ` (${why.detail})`}`);
  }
  if (loadsFully(listings.anchor) && !loadsFully(listings.ours)) {
    const cls = ours.failed === null ? 'unexpected' : 'refused';
    differences.push({
      file,
      what: 'loader',
      class: cls,
      detail: `loads with the anchor's result, not with ours (exit ${listings.ours.exit})`,
    });
  }
  return { differences, byName };
}
