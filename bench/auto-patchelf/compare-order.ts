// The order of the directories our runpath names, against the anchor's (compare.ts has the classes).
// Our order is computed again here, from the disk, as docs/auto-patchelf.md ("The order of the
// runpath") documents it, and ours must be that order:
// - the base order: R as our JSON report lists it (--runtime-dependencies for a file with an
//   interpreter, each dependency's directory in the order the dependencies come, --append-rpaths), the
//   file's other `$ORIGIN` entries it keeps before the --append-rpaths that resolve nothing;
// - the rules: the entries pinned first and last stay there, in their order; the file's own entries keep
//   their order (own-order); no entry ahead of the one a library was chosen from holds another copy of
//   it (no-shadowing); no added entry ahead of one of the file's own entries holds another copy of a
//   library there, which the file may dlopen by name (siblings-first);
// - the order taken: each time, the first entry of the base order that no rule holds back.
// The anchor writes the base order's directories in the base order. So where the two differ the base
// order breaks a rule, and the difference is in the class of each rule it breaks; for a rule about a
// name, the loader, asked for the name with our runpath (the probe), must open the copy the rule keeps.

import { basename, dirname, join } from 'node:path';
import { DRIVER_DIRS, masked } from './cases.js';
import type { CompareContext, Difference, FileView } from './compare.js';
import { libraryIn, libraryNames, sameLibrary } from './library-files.js';
import { probeLookup } from './loader-list.js';
import { firstOccurrences, unmask } from './read-back.js';

/** Why `from` comes ahead of `to`: an entry's place (pinned), or a rule of compare.ts's classes. */
type Rule =
  | { readonly class: 'pinned'; readonly from: string; readonly to: string }
  | { readonly class: 'own-order'; readonly from: string; readonly to: string }
  | {
      readonly class: 'no-shadowing' | 'siblings-first';
      readonly from: string;
      readonly to: string;
      readonly name: string;
      /** The copy the rule keeps: what the loader must open for `name` with our runpath. */
      readonly keeps: string;
    };

/** Our base order from R, the places pinned in it, and the rules over it. */
function rulesOf(
  ours: FileView,
  listR: readonly string[],
  own: readonly string[],
  context: CompareContext,
  like: string,
): { base: string[]; pinned: Rule[]; rules: Exclude<Rule, { class: 'pinned' }>[] } {
  const onDisk = (dir: string): string => unmask(dir, context.oursCopy);
  const chosenDirs = ours.found.map((found) => found.dir);
  const first = context.runtimeDependencies.filter((dir) => ours.interpreter.before !== null && listR.includes(dir));
  const last = context.appendRpaths.filter((dir) => listR.includes(dir) && !first.includes(dir) && !chosenDirs.includes(dir));
  const base = firstOccurrences([
    ...first,
    ...listR.filter((dir) => !first.includes(dir) && !last.includes(dir)),
    ...own.filter((dir) => !listR.includes(dir)),
    ...last,
  ]);
  const rank = (dir: string): number => (first.includes(dir) ? 0 : last.includes(dir) ? 2 : 1);
  const pinned: Rule[] = base.flatMap((from, i) =>
    base
      .slice(i + 1)
      .flatMap((to): Rule[] =>
        rank(from) < rank(to) || (rank(from) === rank(to) && rank(from) !== 1) ? [{ class: 'pinned', from, to }] : [],
      ),
  );
  const rules: Exclude<Rule, { class: 'pinned' }>[] = [];
  const owned = own.filter((dir) => base.includes(dir));
  owned.slice(1).forEach((to, i) => {
    rules.push({ class: 'own-order', from: owned[i] as string, to });
  });
  const holdingAnother = (name: string, copy: string, candidates: readonly string[]): string[] =>
    candidates.filter((dir) => {
      const other = libraryIn(onDisk(dir), name, like);
      return other !== null && !sameLibrary(other, copy);
    });
  for (const { name, dir } of ours.found) {
    const keeps = libraryIn(onDisk(dir), basename(name), like);
    if (keeps === null) continue;
    const others = base.filter((d) => d !== dir);
    for (const to of holdingAnother(basename(name), keeps, others)) rules.push({ class: 'no-shadowing', from: dir, to, name, keeps });
  }
  for (const dir of owned) {
    for (const name of libraryNames(onDisk(dir))) {
      const keeps = libraryIn(onDisk(dir), name, like);
      if (keeps === null) continue;
      const added = base.filter((d) => !own.includes(d));
      for (const to of holdingAnother(name, keeps, added)) rules.push({ class: 'siblings-first', from: dir, to, name, keeps });
    }
  }
  return { base, pinned, rules };
}

/** Each time the first entry of `base` that no rule holds back; null when the rules make a cycle. */
function documentedOrder(base: readonly string[], rules: readonly Rule[]): string[] | null {
  const left = [...base];
  const placed: string[] = [];
  while (left.length > 0) {
    const ready = left.find((dir) => !rules.some((rule) => rule.to === dir && left.includes(rule.from)));
    if (ready === undefined) return null;
    placed.push(ready);
    left.splice(left.indexOf(ready), 1);
  }
  return placed;
}

/** A runpath with `$ORIGIN` expanded, as the probe's search list. */
const expanded = (runpath: string | null, copy: string, file: string): string =>
  (runpath ?? '').replace(/\$ORIGIN|\$\{ORIGIN\}/g, dirname(join(copy, file)));

/**
 * Where our resolver wrote a runpath (R not empty), our order must be the documented one; where the
 * directories both have come in another order, each rule the base order breaks is a difference of its
 * class, and a rule about a name is probed.
 */
export async function compareOrder(
  anchor: FileView,
  ours: FileView,
  own: readonly string[],
  context: CompareContext,
  like: string,
): Promise<Difference[]> {
  const file = anchor.path;
  if (ours.listR === null || ours.listR.length === 0) return [];
  const a = firstOccurrences(anchor.resolved);
  const o = firstOccurrences(ours.resolved).filter((dir) => !DRIVER_DIRS.has(dir));
  const { base, pinned, rules } = rulesOf(ours, ours.listR, own, context, like);
  const documented = documentedOrder(base, [...pinned, ...rules]);
  const differences: Difference[] = [];
  if (documented?.join(':') !== o.join(':')) {
    const detail = `ours ${o.join(':')}, the documented order ${documented?.join(':') ?? 'none (the rules make a cycle)'}`;
    differences.push({ file, what: 'order', class: 'unexpected', detail });
  }
  const [commonA, commonO] = [a.filter((d) => o.includes(d)), o.filter((d) => a.includes(d))];
  if (commonA.join(':') === commonO.join(':')) return differences;
  const order = `anchor ${a.join(':')}, ours ${o.join(':')}`;
  // The base order keeps every pinned place, by construction.
  const broken = rules.filter((rule) => base.indexOf(rule.from) > base.indexOf(rule.to));
  if (broken.length === 0)
    return [...differences, { file, what: 'order', class: 'unexpected', detail: `${order}: the base order breaks no rule` }];
  const runpaths = {
    anchor: expanded(anchor.runpath.after, context.anchorCopy, file),
    ours: expanded(ours.runpath.after, context.oursCopy, file),
  };
  for (const rule of broken) {
    if (rule.class === 'own-order') {
      const detail = `${order}: the file's own entries keep their order, ${rule.from} before ${rule.to}`;
      differences.push({ file, what: 'order', class: 'own-order', detail });
      continue;
    }
    const [withOurs, withAnchor] = await Promise.all([
      probeLookup(basename(rule.name), runpaths.ours, anchor.machine),
      probeLookup(basename(rule.name), runpaths.anchor, anchor.machine),
    ]);
    const opens = `the loader opens ${withOurs === null ? 'nothing' : masked(context.oursCopy, withOurs)} with ours, ${withAnchor === null ? 'nothing' : masked(context.anchorCopy, withAnchor)} with the anchor's`;
    const detail = `${order}: ${rule.to} holds another ${rule.name} than ${masked(context.oursCopy, rule.keeps)} (${rule.class}); ${opens}`;
    differences.push({
      file,
      what: 'order',
      class: withOurs !== null && sameLibrary(withOurs, rule.keeps) ? rule.class : 'unexpected',
      detail,
    });
  }
  return differences;
}
