// A small system for --auto-patchelf, built from corpus files under a temporary root, so that the
// resolver's proof (the emulated loader) sees nothing of this machine: the trees and the library
// directories lie under --root, whose /lib64 is libc's directory.
//
//   opt/app/bin/app          program (PT_INTERP): needs libc.so.6, libplain.so and libnowhere.so.3
//   opt/app/lib/libplain.so  needs libm.so.6 and libc.so.6
//   opt/app/lib/libarm.so    an aarch64 library: another machine than the interpreter's
//   opt/app/README           not ELF
//   opt/deps/libm.so.6       found through --libs
//   opt/deps2/libm.so.6      the same name in a later --libs directory: a warning
//   lib64/libc.so.6          libc's directory

import { join } from 'node:path';
import { EM, textToByteString } from '../../../src/elf/elf.js';
import type { AutoPatchelfOptions } from '../../../src/batch/resolve-trees.js';
import { ignoreMissingMatcher } from '../../../src/resolve/ignore-missing.js';
import { corpus, textFile, treeIn } from './corpus-tree.js';
import { applyPlanInMemory, planOn } from './plan-in-memory.js';

export interface ResolverTree {
  readonly root: string;
  /** The tree patched: opt/app. */
  readonly tree: string;
  readonly options: AutoPatchelfOptions;
}

/** The corpus program with more DT_NEEDED entries, edited by the project's own planner. */
async function programNeeding(names: readonly string[]): Promise<Uint8Array> {
  const bytes = corpus('x86_64-pie-runpath.elf');
  const { plan } = await planOn(bytes, (editor) => {
    for (const name of names) editor.addNeeded(textToByteString(name));
  });
  return applyPlanInMemory(bytes, plan);
}

export const INTERPRETER = '/lib64/ld-linux-x86-64.so.2';

export async function resolverTree(parent: string): Promise<ResolverTree> {
  const root = await treeIn(parent, {
    'opt/app/bin/app': await programNeeding(['libplain.so', 'libnowhere.so.3']),
    'opt/app/lib/libplain.so': corpus('x86_64-lib-plain.so'),
    'opt/app/lib/libarm.so': corpus('aarch64-lib-64k.so'),
    'opt/app/README': textFile('text\n'),
    'opt/deps/libm.so.6': corpus('x86_64-lib-rpath.so'),
    'opt/deps2/libm.so.6': corpus('x86_64-lib-lld.so'),
    'lib64/libc.so.6': corpus('x86_64-lib-lld.so'),
  });
  const options: AutoPatchelfOptions = {
    libs: [join(root, 'opt/deps'), join(root, 'opt/deps2')],
    runtimeDependencies: [],
    appendRpaths: [],
    ignoredMissing: ignoreMissingMatcher([]),
    interpreter: { path: textToByteString(INTERPRETER), machine: EM.EM_X86_64, osAbi: 0 },
    libcDir: join(root, 'lib64'),
    keepLibc: false,
    relativeToTree: false,
    root,
    host: { arch: 'x64', cwd: '/' },
  };
  return { root, tree: join(root, 'opt/app'), options };
}
