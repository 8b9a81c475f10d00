// The anchor's result against ours, file by file, each difference in the class of the documented rule
// behind it (docs/auto-patchelf.md), its evidence checked on the disk and by the real loader
// (loader-list.ts). The classes:
// - driver: the driver's or cuda_compat's directory, or a library only the driver provides (rule 3:
//   the anchor has no driver rule, and takes the index's copy or calls it missing);
// - origin-kept: a directory we keep because the file named it through `$ORIGIN`/`${ORIGIN}`;
// - determinism: both sides took one name from two directories of the index that hold it, ours not
//   named by the file's own runpath (the anchor follows readdir order; we, byte order);
// - own-copy: we took a name from the first of the file's own `$ORIGIN` directories that holds it,
//   where the anchor took another copy (rule 4);
// - glibc-only: we added the directory of a library that libc's directory also holds and that is not
//   glibc's own, which the anchor counts as libc's (rule 2, a libc directory that holds more);
// - no-shadowing, siblings-first, own-order: the same directories in another order, because the
//   anchor's order (our base order, where both chose alike) breaks a rule of the runpath's order
//   (src/resolve/runpath-order.ts): an entry ahead of the one we chose a library from holds another copy
//   of it; an added entry ahead of one of the file's own entries holds another copy of a library
//   there, which the file may dlopen by name; the file's own entries keep their order.
//   compare-order.ts computes the documented order again, and ours must be it; for a rule about a
//   name, the loader, asked for the name with our runpath (the probe: a DT_NEEDED entry is searched as
//   a dlopen by name is), must open the copy the rule keeps. --append-rpaths last is checked there too,
//   never a difference: the anchor writes them last as well;
// - anchor-shadows: with the anchor's result the loader opens another copy of a library than the one
//   the anchor chose (a finding about the anchor, compare-loaded.ts);
// - refused: a file we did not write (exit 3) because its runpath could not be ordered or proven, which
//   the anchor wrote; the detail is our reason.
// Anything else is unexpected: a difference no rule explains, an order of ours that is not the
// documented one, the loader opening with our runpath another copy than the one we chose, a file that
// loads with the anchor's result and not with ours.

import { basename, join } from 'node:path';
import { isGlibcLibrary } from '../../src/loader/glibc-libraries.js';
import { textToByteString } from '../../src/elf/byte-string.js';
import { DRIVER_LIBRARIES } from '../../src/resolve/driver-libraries.js';
import type { FileResult } from './anchor-result.js';
import { DRIVER_DIRS } from './cases.js';
import { compareOrder } from './compare-order.js';
import { libraryIn } from './library-files.js';
import { firstOccurrences, isOriginEntry, runpathDirs, unmask } from './read-back.js';

export const DIFFERENCE_CLASSES = [
  'driver',
  'origin-kept',
  'determinism',
  'own-copy',
  'glibc-only',
  'no-shadowing',
  'siblings-first',
  'own-order',
  'anchor-shadows',
  'refused',
  'unexpected',
] as const;
export type DifferenceClass = (typeof DIFFERENCE_CLASSES)[number];

/** What both sides are compared on; `found`: each dependency resolved through the index, and its directory. */
export interface FileView
  extends Pick<
    FileResult,
    'path' | 'machine' | 'needed' | 'interpreter' | 'runpath' | 'resolved' | 'found' | 'missing' | 'ignoredMissing'
  > {
  /** The error of a file the run did not write (ours only), or null. */
  readonly failed: string | null;
  /** R, our resolver's directories in order (ours only; null: the resolver left the file alone). */
  readonly listR: readonly string[] | null;
}

export interface Difference {
  readonly file: string;
  readonly what: 'interpreter' | 'resolved' | 'order' | 'missing' | 'loader' | 'written';
  readonly class: DifferenceClass;
  readonly detail: string;
}

export interface CompareContext {
  readonly anchorCopy: string;
  readonly oursCopy: string;
  /** libc's directory, and whether ours counted only glibc's own libraries there as libc's (rule 2). */
  readonly libc: { readonly dir: string; readonly glibcOnly: boolean };
  /** --runtime-dependencies and --append-rpaths, as the runpaths name them (real paths, `<tree>/...` in a copy). */
  readonly runtimeDependencies: readonly string[];
  readonly appendRpaths: readonly string[];
}

const DRIVER_NAMES = new Set(DRIVER_LIBRARIES.map((library) => library.name));
const isDriverLibrary = (name: string): boolean => DRIVER_NAMES.has(basename(name));

/** Our reasons for not writing a file (src/batch/settle-runpath.ts): the order, or its proof. */
const REFUSALS = [/^cannot order the runpath: /, /^the loader would not load what was chosen: /, /: libc's directory .* provides it, but /];
const isRefusal = (failed: string): boolean => REFUSALS.some((pattern) => pattern.test(failed));

/** The directory a side took a dependency from through its index, or null. */
export const choiceOf = (view: FileView, name: string): string | null => view.found.find((found) => found.name === name)?.dir ?? null;

/** The directories the file's own `$ORIGIN`/`${ORIGIN}` entries name, in order (the same in both copies). */
export function ownDirectories(view: FileView, context: CompareContext): string[] {
  const entries = (view.runpath.before ?? '').split(':').filter(isOriginEntry);
  return firstOccurrences(runpathDirs(entries.length === 0 ? null : entries.join(':'), context.oursCopy, view.path));
}

/** Why both sides took a name from different places, when a rule says; null when none does. */
export function choiceClass(
  name: string,
  dirs: { readonly anchor: string | null; readonly ours: string | null },
  own: readonly string[],
  context: CompareContext,
  like: string,
): { readonly class: DifferenceClass; readonly detail: string } | null {
  const file = basename(name);
  const { anchor, ours } = dirs;
  if (anchor !== null && ours !== null && anchor !== ours) {
    const firstOwn = own.find((dir) => libraryIn(unmask(dir, context.oursCopy), file, like) !== null);
    if (firstOwn === ours && !own.includes(anchor))
      return { class: 'own-copy', detail: `${name}: the anchor took ${anchor}, ours the file's own ${ours}` };
    const anchorHolds = libraryIn(unmask(anchor, context.anchorCopy), file, like) !== null;
    if (!own.includes(ours) && anchorHolds && libraryIn(unmask(ours, context.oursCopy), file, like) !== null)
      return { class: 'determinism', detail: `${name}: the anchor took ${anchor}, ours ${ours}` };
    return null;
  }
  if (
    anchor === null &&
    ours !== null &&
    context.libc.glibcOnly &&
    !isGlibcLibrary(textToByteString(file)) &&
    libraryIn(context.libc.dir, file, like) !== null
  )
    return { class: 'glibc-only', detail: `${name}: the anchor counts ${context.libc.dir}'s copy as libc's, ours took ${ours}` };
  if (anchor !== null && ours === null && isDriverLibrary(name))
    return { class: 'driver', detail: `${name}: the anchor took ${anchor}, ours leaves it to the driver` };
  return null;
}

/** The directories only one side has, each in the class of its rule. */
function compareResolved(anchor: FileView, ours: FileView, own: readonly string[], context: CompareContext, like: string): Difference[] {
  const file = anchor.path;
  const [a, o] = [firstOccurrences(anchor.resolved), firstOccurrences(ours.resolved)];
  const onlyOurs = o.filter((dir) => !a.includes(dir));
  const explained = new Set<string>();
  const differences: Difference[] = [];
  const unexpected = (detail: string): Difference => ({ file, what: 'resolved', class: 'unexpected', detail });
  for (const dir of a.filter((d) => !o.includes(d))) {
    const names = anchor.found.filter((found) => found.dir === dir).map((found) => found.name);
    if (names.length === 0) differences.push(unexpected(`only the anchor has ${dir}, and took nothing from it`));
    for (const name of names) {
      const ourDir = choiceOf(ours, name);
      const why = choiceClass(name, { anchor: dir, ours: ourDir }, own, context, like);
      if (ourDir !== null) explained.add(ourDir);
      differences.push(
        why === null
          ? unexpected(`${name}: only the anchor has ${dir}; ours took it from ${ourDir ?? 'no directory'}`)
          : { file, what: 'resolved', ...why },
      );
    }
  }
  for (const dir of onlyOurs.filter((d) => !explained.has(d))) {
    if (DRIVER_DIRS.has(dir)) differences.push({ file, what: 'resolved', class: 'driver', detail: `ours adds ${dir}` });
    else if (own.includes(dir) && !ours.found.some((found) => found.dir === dir))
      differences.push({ file, what: 'resolved', class: 'origin-kept', detail: `ours keeps ${dir}` });
    else {
      const names = ours.found.filter((found) => found.dir === dir).map((found) => found.name);
      if (names.length === 0) differences.push(unexpected(`only ours has ${dir}`));
      for (const name of names) {
        const why = choiceClass(name, { anchor: choiceOf(anchor, name), ours: dir }, own, context, like);
        differences.push(why === null ? unexpected(`${name}: only ours has ${dir}`) : { file, what: 'resolved', ...why });
      }
    }
  }
  return differences;
}

function compareMissing(anchor: FileView, ours: FileView): Difference[] {
  const describe = (view: FileView): Map<string, string> =>
    new Map([...view.missing.map((name) => [name, 'missing'] as const), ...view.ignoredMissing.map((name) => [name, 'ignored'] as const)]);
  const [a, o] = [describe(anchor), describe(ours)];
  const names = [...new Set([...a.keys(), ...o.keys()])].filter((name) => a.get(name) !== o.get(name));
  return names.map((name) => ({
    file: anchor.path,
    what: 'missing',
    class: isDriverLibrary(name) && o.get(name) === undefined ? 'driver' : 'unexpected',
    detail: `${name}: anchor ${a.get(name) ?? 'found'}, ours ${o.get(name) ?? 'found'}`,
  }));
}

/**
 * Every difference between what the two sides wrote in one file and what they could not find. A file
 * we refused is one difference (what the anchor wrote, and our reason), its missing libraries compared.
 */
export async function compareFile(anchor: FileView, ours: FileView, context: CompareContext): Promise<Difference[]> {
  const file = anchor.path;
  const missing = compareMissing(anchor, ours);
  if (ours.failed !== null) {
    const inCopy = (text: string, copy: string): string => text.replaceAll(`${copy}/`, '<tree>/');
    const detail = `the anchor wrote ${inCopy(anchor.runpath.after ?? 'no runpath', context.anchorCopy)}; ours: ${inCopy(ours.failed, context.oursCopy)}`;
    return [{ file, what: 'written', class: isRefusal(ours.failed) ? 'refused' : 'unexpected', detail }, ...missing];
  }
  const interpreter: Difference[] =
    anchor.interpreter.after === ours.interpreter.after
      ? []
      : [{ file, what: 'interpreter', class: 'unexpected', detail: `anchor ${anchor.interpreter.after}, ours ${ours.interpreter.after}` }];
  const own = ownDirectories(ours, context);
  const like = join(context.oursCopy, file);
  return [
    ...interpreter,
    ...compareResolved(anchor, ours, own, context, like),
    ...(await compareOrder(anchor, ours, own, context, like)),
    ...missing,
  ];
}
