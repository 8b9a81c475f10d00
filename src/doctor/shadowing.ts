// Two ways the loader ends up with another copy of a library than the one meant (docs/doctor.md,
// "Shadowing"):
//   - runpath-shadows-own: an entry of an object's runpath holds another copy of a library that one of
//     the object's own `$ORIGIN` entries after it holds. The loader takes the first for every lookup by
//     that name, the object's dlopens by name included: cuDNN, NCCL and nvshmem open their siblings so.
//     An error when the object asks for that name (DT_NEEDED, or a name its .dynstr or .rodata holds);
//     a warning otherwise. The fix puts the object's own entries first.
//   - name-conflict: a name loaded first for one requester is what every later requester gets (glibc
//     reuses a loaded object by name), though the later one's own search would find another file.
// The same file, or a byte-identical copy, is no other copy.

import { type ByteString, byteStringToText, joinRunpath, splitRunpath, usesOrigin } from '../elf/elf.js';
import type { LoadEmulation } from '../loader/emulate-load.js';
import type { LinkMap } from '../loader/link-map.js';
import type { LinkNamespace } from '../loader/link-namespace.js';
import type { ObjectFacts } from '../loader/object-facts.js';
import { sameBytes } from '../loader/same-bytes.js';
import { loaderTokens } from '../loader/search-lists.js';
import { splitSearchList } from '../loader/search-path.js';
import { librariesNamed, type DlopenCall } from './cuda-dlopen.js';
import type { Finding } from './findings.js';
import type { LibraryListings } from '../loader/library-listings.js';
import type { ObjectStrings } from './object-strings.js';

const text = byteStringToText;

/** Whether two objects are one library: the same file, or a byte-identical copy. */
async function sameLibrary(a: ObjectFacts, b: ObjectFacts): Promise<boolean> {
  if (a.fileId === b.fileId) return true;
  return a.size === b.size && (await sameBytes(a.hostPath, b.hostPath, a.size));
}

interface ListEntry {
  readonly entry: ByteString;
  /** The directory as the loader spells it (ending in '/'); null for one it cannot tell (relative, a token without a value). */
  readonly directory: ByteString | null;
}

/** The entries of the object's DT_RUNPATH (else DT_RPATH), each with the directory the loader makes of it. */
export function searchListOf(
  map: LinkMap,
  namespace: LinkNamespace,
): { readonly tag: string; readonly entries: readonly ListEntry[] } | null {
  const value = map.facts.runpath ?? map.facts.rpath;
  if (value === null || value === '') return null;
  const tokens = { ...loaderTokens(namespace.loader), origin: map.origin };
  const entries = splitRunpath(value).map((entry) => {
    const [directory] = splitSearchList(entry, ':', tokens);
    return { entry, directory: directory?.startsWith('/') === true ? directory : null };
  });
  return { tag: map.facts.runpath === null ? 'RPATH' : 'RUNPATH', entries };
}

/** The runpath with the object's own (`$ORIGIN`) entries first, each group in its order: what the fix writes. */
function ownFirst(entries: readonly ListEntry[]): ByteString {
  return joinRunpath([...entries.filter((e) => usesOrigin(e.entry)), ...entries.filter((e) => !usesOrigin(e.entry))].map((e) => e.entry));
}

/** The names an object asks for by name: its DT_NEEDED, and those of `names` it names (what it dlopens). */
async function askedFor(map: LinkMap, names: ReadonlySet<ByteString>, strings: ObjectStrings): Promise<Set<ByteString>> {
  return new Set([...map.facts.needed, ...(await librariesNamed(map.facts, names, strings))]);
}

async function shadowsOwn(map: LinkMap, namespace: LinkNamespace, strings: ObjectStrings, listings: LibraryListings): Promise<Finding[]> {
  const list = searchListOf(map, namespace);
  if (list === null) return [];
  const findings: Finding[] = [];
  for (const [j, own] of list.entries.entries()) {
    if (own.directory === null || !usesOrigin(own.entry)) continue;
    const names = listings.namesIn(own.directory);
    if (names.size === 0) continue;
    for (const [i, earlier] of list.entries.slice(0, j).entries()) {
      if (earlier.directory === null || usesOrigin(earlier.entry)) continue;
      const shadowed: ByteString[] = [];
      for (const name of [...names].sort()) {
        const [taken, meant] = await Promise.all([
          namespace.findInDirectory(name, earlier.directory),
          namespace.findInDirectory(name, own.directory),
        ]);
        if (taken.kind === 'found' && meant.kind === 'found' && !(await sameLibrary(taken.facts, meant.facts))) shadowed.push(name);
      }
      if (shadowed.length === 0) continue;
      const asked = await askedFor(map, names, strings);
      const used = shadowed.filter((name) => asked.has(name));
      const shown = (used.length > 0 ? used : shadowed).map(text);
      findings.push({
        severity: used.length > 0 ? 'error' : 'warning',
        code: 'runpath-shadows-own',
        message:
          `${text(map.path)}: entry ${i + 1} of its ${list.tag}, ${text(earlier.entry)}, holds other copies of ${shown.join(', ')}, ` +
          `which its own entry ${j + 1}, ${text(own.entry)}, holds: the loader takes ${text(earlier.directory)}'s for every ` +
          `lookup of those names${used.length > 0 ? `, and ${text(map.path)} asks for ${used.length === 1 ? 'it' : 'them'}` : ''}`,
        fix: `put its own entries first: cuda-patchelf set-runpath '${text(ownFirst(list.entries))}' ${map.facts.hostPath}`,
      });
    }
  }
  return findings;
}

/** A name one requester gets from the object another loaded first, where its own search finds another file. */
async function conflict(namespace: LinkNamespace, requester: LinkMap, name: ByteString, loaded: LinkMap): Promise<Finding | null> {
  if (name.includes('/')) return null;
  const own = await namespace.wouldFind(requester, name);
  if (own.kind !== 'found' || (await sameLibrary(own.facts, loaded.facts))) return null;
  return {
    severity: 'warning',
    code: 'name-conflict',
    message:
      `${text(name)}: ${text(requester.path)} would load ${text(own.path)} by its own search, but ${text(loaded.path)}, ` +
      `loaded first for ${text(loaded.loader?.path ?? loaded.name)}, is the one the process uses for every requester`,
    fix: null,
  };
}

/** The shadowing findings of one load: each object's runpath, then each name two requesters would get from different files. */
export async function shadowingFindings(
  emulation: LoadEmulation,
  dlopens: readonly DlopenCall[],
  strings: ObjectStrings,
  listings: LibraryListings,
): Promise<Finding[]> {
  const { namespace } = emulation;
  const findings: Finding[] = [];
  for (const map of namespace.maps) {
    if (map.foundBy.rule !== 'interpreter') findings.push(...(await shadowsOwn(map, namespace, strings, listings)));
  }
  const reused = [
    ...emulation.edges.map((edge) => ({ requester: edge.from, name: edge.name, resolution: edge.resolution })),
    ...dlopens.map((call) => ({ requester: call.caller, name: call.name, resolution: call.resolution })),
  ];
  const said = new Set<string>();
  for (const { requester, name, resolution } of reused) {
    if (resolution.kind !== 'loaded' || resolution.how !== 'already-loaded') continue;
    const found = await conflict(namespace, requester, name, resolution.map);
    if (found !== null && !said.has(found.message)) findings.push(found);
    if (found !== null) said.add(found.message);
  }
  return findings;
}
