// The order of the runpath the resolver writes, so that the loader opens what the resolver chose. A
// runpath is one ordered list for every lookup of the file, its dlopens by name included, and the
// loader takes a name from the first entry that holds it. So:
//   - for each dependency the resolver chose a file for, no entry before the chosen one holds another
//     file of that name (a dependency libc's directory provides comes after the whole runpath: no
//     entry may hold another file of its name);
//   - the file's own entries keep their order, and no added entry goes ahead of an own entry holding a
//     library of the same name: a library finds its `$ORIGIN` siblings, which it may dlopen by name,
//     before anything the resolver added;
//   - --runtime-dependencies stay first and --append-rpaths last, in their order.
// The same file through a link, or a byte-identical copy, is no other file. Among the orders that keep
// every rule, the one closest to the base order (resolve-file.ts) is taken, so the result depends on the
// inputs alone; when none keeps them all, the answer is a conflict naming the library and both entries,
// never a silent choice. What a directory holds is asked of an oracle (the batch asks the loader model).

import { type ByteString, byteStringToText, EMPTY_BYTE_STRING } from '../elf/byte-string.js';
import type { PlacedEntry } from './resolve-file.js';

/** A dependency the resolver chose a file for: through `entry`, or after the runpath (null: libc's directory). */
export interface ChosenDependency<F> {
  readonly name: ByteString;
  readonly entry: ByteString | null;
  readonly file: F;
}

/** What the order asks of the disk, as the loader sees it; `F` identifies a file. */
export interface DirectoryOracle<F> {
  /** The file the loader takes for `name` from the directory an entry names; null: none, or not known (a relative entry). */
  holder(entry: ByteString, name: ByteString): Promise<F | null>;
  /** False when holder(entry, name) is surely null: a quick look at what the run has listed, before holder is asked. */
  mayHold(entry: ByteString, name: ByteString): boolean;
  /** Whether two files are one library: the same file, or a byte-identical copy. */
  same(a: F, b: F): Promise<boolean>;
  /** The names of the libraries (`*.so*`) the directory an entry names holds, in byte order. */
  libraryNames(entry: ByteString): Promise<Iterable<ByteString>>;
}

/** Why one entry must come before another. */
type Because =
  | { readonly kind: 'pinned' }
  | { readonly kind: 'own-order' }
  /** The resolver chose `name` from the earlier entry; the later one holds another file of that name. */
  | { readonly kind: 'chosen'; readonly name: ByteString }
  /** The earlier entry is the file's own and holds `name`; the later, added one holds another file of that name. */
  | { readonly kind: 'own-library'; readonly name: ByteString };

export interface OrderConflict {
  readonly name: ByteString;
  /** The entry that should come first for `name` (null: libc's directory, after the runpath). */
  readonly wanted: ByteString | null;
  /** The entry that holds another `name` and cannot come after it. */
  readonly other: ByteString;
  /** Why `other` must come before `wanted`: a sentence end, for the one-line error (text, the names in it decoded). */
  readonly why: string;
}

export type OrderResult =
  | { readonly kind: 'ordered'; readonly entries: readonly ByteString[] }
  | ({ readonly kind: 'conflict' } & OrderConflict);

interface Edge {
  readonly from: number;
  readonly to: number;
  readonly because: Because;
}

const PLACE_RANK = { first: 0, own: 1, added: 1, last: 2 } as const;

/** The edges that only the places give: first before the rest, the rest before last, each pinned group in its order. */
function placeEdges(entries: readonly PlacedEntry[]): Edge[] {
  const edges: Edge[] = [];
  entries.forEach((a, i) => {
    entries.forEach((b, j) => {
      const [ra, rb] = [PLACE_RANK[a.place], PLACE_RANK[b.place]];
      const pinnedPair = ra === rb && ra !== 1 && i < j;
      if (ra < rb || pinnedPair) edges.push({ from: i, to: j, because: { kind: 'pinned' } });
    });
  });
  const own = entries
    .map((entry, i) => ({ entry, i }))
    .filter(({ entry }) => entry.place === 'own' && entry.ownIndex !== null)
    .sort((a, b) => (a.entry.ownIndex as number) - (b.entry.ownIndex as number));
  for (let k = 1; k < own.length; k++) {
    const [earlier, later] = [own[k - 1] as { i: number }, own[k] as { i: number }];
    edges.push({ from: earlier.i, to: later.i, because: { kind: 'own-order' } });
  }
  return edges;
}

/** Whether `entry` holds a file of `name` other than `file`. */
async function holdsAnother<F>(oracle: DirectoryOracle<F>, entry: ByteString, name: ByteString, file: F): Promise<boolean> {
  if (!oracle.mayHold(entry, name)) return false;
  const held = await oracle.holder(entry, name);
  return held !== null && !(await oracle.same(held, file));
}

function describe(because: Because, earlier: ByteString, later: ByteString): string {
  switch (because.kind) {
    case 'pinned':
      return 'it is a --runtime-dependencies or --append-rpaths entry, whose place is fixed';
    case 'own-order':
      return "the file's own entries keep their order";
    case 'chosen':
      return `the resolver chose ${byteStringToText(because.name)} from ${byteStringToText(earlier)}, and ${byteStringToText(later)} holds another`;
    case 'own-library':
      return `it is the file's own entry and holds ${byteStringToText(because.name)}, of which ${byteStringToText(later)} holds another`;
  }
}

/**
 * A cycle among `left` (the entries no order could place), as edges in order; one of them carries a name.
 * Every entry left has a predecessor left, so walking back from any one comes round.
 */
function cycleIn(left: ReadonlySet<number>, edges: readonly Edge[]): Edge[] {
  const into = (to: number): Edge => edges.find((edge) => edge.to === to && left.has(edge.from)) as Edge;
  const seen: number[] = [];
  let at = [...left][0] as number;
  while (!seen.includes(at)) {
    seen.push(at);
    at = into(at).from;
  }
  const cycle: Edge[] = [];
  let node = at;
  do {
    const edge = into(node);
    cycle.unshift(edge);
    node = edge.from;
  } while (node !== at);
  return cycle;
}

function conflictOf(entries: readonly PlacedEntry[], cycle: readonly Edge[]): OrderResult {
  const rank = (edge: Edge): number => (edge.because.kind === 'chosen' ? 0 : edge.because.kind === 'own-library' ? 1 : 2);
  const named = [...cycle].sort((a, b) => rank(a) - rank(b))[0] as Edge;
  // The edge after it in the cycle says why its later entry must come first.
  const back = cycle[(cycle.indexOf(named) + 1) % cycle.length] as Edge;
  const wanted = (entries[named.from] as PlacedEntry).entry;
  const other = (entries[named.to] as PlacedEntry).entry;
  const name = named.because.kind === 'chosen' || named.because.kind === 'own-library' ? named.because.name : EMPTY_BYTE_STRING;
  return { kind: 'conflict', name, wanted, other, why: describe(back.because, other, (entries[back.to] as PlacedEntry).entry) };
}

/**
 * The order of `entries` (the base order: see resolve-file.ts) that keeps every rule above for the
 * `chosen` dependencies, or the conflict that no order avoids.
 */
export async function orderRunpath<F>(
  entries: readonly PlacedEntry[],
  chosen: readonly ChosenDependency<F>[],
  oracle: DirectoryOracle<F>,
): Promise<OrderResult> {
  const edges = placeEdges(entries);
  const indexOf = (entry: ByteString): number => entries.findIndex((placed) => placed.entry === entry);
  for (const dependency of chosen) {
    const at = dependency.entry === null ? -1 : indexOf(dependency.entry);
    for (let j = 0; j < entries.length; j++) {
      const other = (entries[j] as PlacedEntry).entry;
      if (j === at || !(await holdsAnother(oracle, other, dependency.name, dependency.file))) continue;
      if (at < 0) {
        const why = `it holds another ${byteStringToText(dependency.name)} than libc's directory, which the loader reaches after the runpath`;
        return { kind: 'conflict', name: dependency.name, wanted: null, other, why };
      }
      edges.push({ from: at, to: j, because: { kind: 'chosen', name: dependency.name } });
    }
  }
  for (let i = 0; i < entries.length; i++) {
    const own = entries[i] as PlacedEntry;
    if (own.ownIndex === null) continue;
    for (const name of await oracle.libraryNames(own.entry)) {
      // Most of a directory's libraries are in no added entry: their file is not asked for.
      const others = entries.flatMap((added, j) => (added.ownIndex === null && oracle.mayHold(added.entry, name) ? [j] : []));
      const file = others.length === 0 ? null : await oracle.holder(own.entry, name);
      if (file === null) continue;
      for (const j of others) {
        if (!(await holdsAnother(oracle, (entries[j] as PlacedEntry).entry, name, file))) continue;
        edges.push({ from: i, to: j, because: { kind: 'own-library', name } });
      }
    }
  }
  // Kahn's algorithm, always taking the ready entry that comes first in the base order.
  const placed: number[] = [];
  const left = new Set(entries.keys());
  while (left.size > 0) {
    const ready = [...left].find((i) => !edges.some((edge) => edge.to === i && left.has(edge.from)));
    if (ready === undefined) return conflictOf(entries, cycleIn(left, edges));
    placed.push(ready);
    left.delete(ready);
  }
  return { kind: 'ordered', entries: placed.map((i) => (entries[i] as PlacedEntry).entry) };
}
