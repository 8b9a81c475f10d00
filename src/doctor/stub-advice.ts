// What to do about a stub libcuda, by where the loader found it: a runpath entry of some object (the
// remove-stubs hook takes it out: with Nixpkgs' patterns when they match the entry, else with the
// entry itself as the pattern, which is what makes the hook see it), LD_LIBRARY_PATH (no runpath edit
// can help: a runpath comes after it), or the loader's cache and default directories (the stub was
// installed where no stub belongs).

import { byteStringToText } from '../elf/elf.js';
import { NIXPKGS_STUBS_PATTERNS, stubsMatcher } from '../hook-engine/stubs-pattern.js';
import type { LinkMap } from '../loader/link-map.js';
import type { LinkNamespace } from '../loader/link-namespace.js';
import { searchListOf } from './shadowing.js';

const text = byteStringToText;
const nixpkgsStubs = stubsMatcher(NIXPKGS_STUBS_PATTERNS);

/** A shell word for a command line to paste. */
const quoted = (word: string): string => (/^[\w./@%+=:,-]+$/.test(word) ? word : `'${word.replace(/'/g, "'\\''")}'`);

/** The fix of a libcuda-stub finding: `stub` is the libcuda the program would load. */
export function stubAdvice(stub: LinkMap, namespace: LinkNamespace): string {
  const { rule, owner, directory } = stub.foundBy;
  const where = text(directory ?? stub.path);
  if ((rule === 'runpath' || rule === 'rpath') && owner !== null && directory !== null) {
    const entry = searchListOf(owner, namespace)?.entries.find((e) => e.directory !== null && directory.startsWith(e.directory));
    if (entry !== undefined) {
      const pattern = nixpkgsStubs(entry.entry) ? [] : ['--stubs-pattern', quoted(text(entry.entry))];
      const command = ['cuda-patchelf', 'apply', quoted(owner.facts.hostPath), '--remove-stubs', ...pattern].join(' ');
      return `take the stubs directory out of the runpath of ${text(owner.path)}, so that the driver's libcuda is found: ${command}`;
    }
  }
  if (rule === 'ld-library-path')
    return (
      `remove ${where} from LD_LIBRARY_PATH (where a wrapper sets it, from the wrapper's LD_LIBRARY_PATH): the loader ` +
      'searches LD_LIBRARY_PATH before any runpath, so no runpath can put the driver ahead of it'
    );
  return `remove the stub ${text(stub.path)}: a stub belongs with the toolkit's link-time libraries, not where the loader looks (${where})`;
}
