// The anchor's result against ours, file by file, and each difference classified. Expected ones:
// - determinism: the anchor took a library from one directory and we from another that holds the
//   same name (it follows readdir order; we, byte order);
// - origin-kept: a directory we keep because the file named it through `$ORIGIN`/`${ORIGIN}`;
// - driver: the driver's or cuda_compat's directory, or a library only the driver provides
//   (the anchor has no driver rule and calls it missing).
// Anything else is unexpected, and so is a file that loads with the anchor's result and not with ours.

import { existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { FileResult } from './anchor-result.js';
import { CUDA_COMPAT } from './cases.js';
import { type LoaderListing, loadsFully } from './loader-list.js';
import { isOriginEntry, runpathDirs } from './read-back.js';

/** What both sides are compared on. */
export type FileView = Pick<
  FileResult,
  'path' | 'machine' | 'needed' | 'interpreter' | 'runpath' | 'resolved' | 'missing' | 'ignoredMissing'
>;

export type DifferenceClass = 'determinism' | 'origin-kept' | 'driver' | 'unexpected';

export interface Difference {
  readonly file: string;
  readonly what: 'interpreter' | 'resolved' | 'order' | 'missing' | 'loader';
  readonly class: DifferenceClass;
  readonly detail: string;
}

const DRIVER_DIRS = new Set(['/run/opengl-driver/lib', `${CUDA_COMPAT}/compat`]);

/**
 * Libraries only the NVIDIA driver provides (the specification's list; the resolver's own module is
 * the reference once it exists): found through the driver hook's entry, never through the index.
 */
const DRIVER_LIBRARIES = [
  /^libcuda\.so(\.1)?$/,
  /^libnvidia-(ml|ptxjitcompiler|nvvm|opencl|encode|fbc|cfg)\.so\.[14]$/,
  /^libcudadebugger\.so\.1$/,
  /^libnvcuvid\.so\.1$/,
  /^libnvoptix\.so\.1$/,
  /^libnvrm_.*\.so$/,
];
const isDriverLibrary = (name: string): boolean => DRIVER_LIBRARIES.some((pattern) => pattern.test(name));

export interface CompareContext {
  readonly anchorCopy: string;
  readonly oursCopy: string;
}

/** A `<tree>/...` directory in a copy. */
const unmask = (dir: string, copy: string): string => (dir.startsWith('<tree>') ? join(copy, dir.slice('<tree>'.length)) : dir);

/** The first occurrence of each directory: a repeated one changes nothing for the loader. */
const firstOccurrences = (dirs: readonly string[]): string[] => [...new Set(dirs)];

function compareResolved(anchorView: FileView, oursView: FileView, context: CompareContext): Difference[] {
  const file = anchorView.path;
  const anchor = { ...anchorView, resolved: firstOccurrences(anchorView.resolved) };
  const ours = { ...oursView, resolved: firstOccurrences(oursView.resolved) };
  const originEntries = (anchor.runpath.before ?? '').split(':').filter(isOriginEntry).join(':');
  const kept = new Set(runpathDirs(originEntries === '' ? null : originEntries, context.oursCopy, file));
  const differences: Difference[] = [];
  const onlyOurs: string[] = [];
  for (const dir of ours.resolved.filter((d) => !anchor.resolved.includes(d))) {
    if (DRIVER_DIRS.has(dir)) differences.push({ file, what: 'resolved', class: 'driver', detail: `ours adds ${dir}` });
    else if (kept.has(dir)) differences.push({ file, what: 'resolved', class: 'origin-kept', detail: `ours keeps ${dir}` });
    else onlyOurs.push(dir);
  }
  // A directory only the anchor has, paired with one only we have that holds the same needed library.
  const holds = (d: string, copy: string, name: string): boolean => existsSync(join(unmask(d, copy), name));
  for (const dir of anchor.resolved.filter((d) => !ours.resolved.includes(d))) {
    const servedThere = anchor.needed.filter((name) => holds(dir, context.anchorCopy, name));
    if (servedThere.length > 0 && servedThere.every(isDriverLibrary)) {
      differences.push({ file, what: 'resolved', class: 'driver', detail: `the anchor found ${servedThere.join(', ')} in ${dir}` });
      continue;
    }
    const pair = onlyOurs.find((other) =>
      anchor.needed.some((name) => holds(dir, context.anchorCopy, name) && holds(other, context.oursCopy, name)),
    );
    if (pair === undefined) {
      differences.push({ file, what: 'resolved', class: 'unexpected', detail: `only the anchor has ${dir}` });
      continue;
    }
    onlyOurs.splice(onlyOurs.indexOf(pair), 1);
    differences.push({ file, what: 'resolved', class: 'determinism', detail: `the anchor took ${dir}, ours ${pair}` });
  }
  for (const dir of onlyOurs) differences.push({ file, what: 'resolved', class: 'unexpected', detail: `only ours has ${dir}` });
  const common = (from: readonly string[], other: readonly string[]): string => from.filter((d) => other.includes(d)).join(':');
  if (common(anchor.resolved, ours.resolved) !== common(ours.resolved, anchor.resolved))
    differences.push({
      file,
      what: 'order',
      class: 'unexpected',
      detail: `anchor ${anchor.resolved.join(':')}, ours ${ours.resolved.join(':')}`,
    });
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

/** Every difference between what the two sides wrote in one file and what they could not find. */
export function compareFile(anchor: FileView, ours: FileView, context: CompareContext): Difference[] {
  const interpreter: Difference[] =
    anchor.interpreter.after === ours.interpreter.after
      ? []
      : [
          {
            file: anchor.path,
            what: 'interpreter',
            class: 'unexpected',
            detail: `anchor ${anchor.interpreter.after}, ours ${ours.interpreter.after}`,
          },
        ];
  return [...interpreter, ...compareResolved(anchor, ours, context), ...compareMissing(anchor, ours)];
}

/**
 * The loader's view: a library the loader finds with the anchor's result must be found with ours,
 * from the same place (determinism when it is the same name elsewhere), and a file that loads with
 * the anchor's result must load with ours.
 */
export function compareLoaded(file: string, anchor: LoaderListing, ours: LoaderListing, context: CompareContext): Difference[] {
  const where = (path: string | null | undefined, copy: string): string | null =>
    path === null || path === undefined ? null : path.startsWith(`${copy}/`) ? `<tree>/${path.slice(copy.length + 1)}` : path;
  const differences = [...anchor.libraries].flatMap(([name, path]): Difference[] => {
    const [a, o] = [where(path, context.anchorCopy), where(ours.libraries.get(name), context.oursCopy)];
    if (a === null || a === o) return [];
    if (o === null)
      return [{ file, what: 'loader', class: 'unexpected', detail: `${name}: the anchor's result finds it in ${a}, ours does not` }];
    return [
      {
        file,
        what: 'loader',
        class: basename(a) === basename(o) ? 'determinism' : 'unexpected',
        detail: `${name}: anchor ${a}, ours ${o}`,
      },
    ];
  });
  if (differences.length === 0 && loadsFully(anchor) && !loadsFully(ours))
    differences.push({
      file,
      what: 'loader',
      class: 'unexpected',
      detail: `loads with the anchor's result, not with ours (exit ${ours.exit})`,
    });
  return differences;
}
