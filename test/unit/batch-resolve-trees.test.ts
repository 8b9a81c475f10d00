// --auto-patchelf's first phase (src/batch/resolve-trees.ts) and its library index (library-index-walk.ts)
// on corpus files under a temporary root (helpers/resolver-tree.ts), then the batch's second phase
// writing what the first one resolved.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { InterruptPoll, newInterruptFlag, raiseInterrupt } from '../../src/batch/interrupt.js';
import { LibraryIndexWalk } from '../../src/batch/library-index-walk.js';
import { patchTrees } from '../../src/batch/patch-tree.js';
import type { FileItem } from '../../src/batch/process-file.js';
import { readLibraryFacts } from '../../src/batch/resolver-facts.js';
import { resolveTrees } from '../../src/batch/resolve-trees.js';
import { EM, textToByteString } from '../../src/elf/elf.js';
import { ignoreMissingMatcher } from '../../src/resolve/ignore-missing.js';
import { walkTrees } from '../../src/walk/walk-trees.js';
import { useTempDir } from '../helpers/use-temp-dir.js';
import { corpus, textFile, treeIn } from './helpers/corpus-tree.js';
import { applyPlanInMemory, dynamicStrings, planOn } from './helpers/plan-in-memory.js';
import { INTERPRETER, resolverTree } from './helpers/resolver-tree.js';

const scratch = useTempDir('unit-resolve-trees');

/** A corpus library whose runpath is `runpath`, set by the project's planner. */
async function libraryWithRunpath(runpath: string): Promise<Uint8Array> {
  const bytes = corpus('x86_64-lib-plain.so');
  const { plan } = await planOn(bytes, (editor) => editor.setRunpath(textToByteString(runpath), 'keep'));
  return applyPlanInMemory(bytes, plan);
}

describe('LibraryIndexWalk', () => {
  it('records a library under its directory, a link named as its target under the target’s, and no other name', async () => {
    const root = await treeIn(scratch(), {
      'real/libfoo.so.1': corpus('x86_64-lib-plain.so'),
      'links/libfoo.so.1': { symlink: '../real/libfoo.so.1' },
      'links/libbar.so': { symlink: '../real/libfoo.so.1' },
      'real/foo-tool': corpus('x86_64-lib-plain.so'),
    });
    const walk = new LibraryIndexWalk([]);
    const add = async (path: string, isLink: boolean): Promise<string[]> => {
      const facts = await readLibraryFacts(join(root, path));
      if (facts === null) throw new Error(`${path}: no facts`);
      return walk.addLibrary(join(root, path), isLink, facts);
    };
    expect(await add('real/libfoo.so.1', false)).toEqual([]);
    await add('links/libfoo.so.1', true);
    await add('links/libbar.so', true);
    await add('real/foo-tool', false);
    const directories = (name: string): string[] =>
      walk.index.entries(textToByteString(name), EM.EM_X86_64).map((entry) => entry.directory);
    expect(directories('libfoo.so.1')).toEqual([join(root, 'real')]);
    expect(directories('libbar.so')).toEqual([join(root, 'links')]);
    expect(directories('foo-tool')).toEqual([]);
  });

  it("scans directories in order, then those their libraries' runpaths name, each the same way (here not recursively)", async () => {
    const parent = await treeIn(scratch(), {
      'more/libmore.so': corpus('x86_64-lib-lld.so'),
      'more/sub/libdeeper.so': corpus('x86_64-lib-lld.so'),
    });
    const more = join(parent, 'more');
    const root = await treeIn(parent, {
      'tree/libown.so': corpus('x86_64-lib-lld.so'),
      'deps/libchain.so': await libraryWithRunpath(`$ORIGIN/x:${more}:`),
      'deps/libm.so.6': corpus('x86_64-lib-rpath.so'),
      'deps/sub/libdeep.so': corpus('x86_64-lib-lld.so'),
      'deps/notes.so.txt': textFile('a library name, not a library\n'),
      'deps/README': corpus('x86_64-lib-lld.so'),
      'deps2/libm.so.6': corpus('x86_64-lib-lld.so'),
    });
    const tree = join(root, 'tree');
    const walk = new LibraryIndexWalk([tree]);
    await walk.scan([join(root, 'deps'), join(root, 'missing'), tree, join(root, 'deps2'), join(root, 'deps')], false);
    const directories = (name: string): string[] =>
      walk.index.entries(textToByteString(name), EM.EM_X86_64).map((entry) => entry.directory);
    expect(directories('libm.so.6')).toEqual([join(root, 'deps'), join(root, 'deps2')]);
    expect(directories('libchain.so')).toEqual([join(root, 'deps')]);
    expect(directories('libmore.so')).toEqual([more]);
    // Not recursive; a trees' directory is not scanned again; what is not ELF, or not named as a library, is none.
    const none = ['libdeep.so', 'libdeeper.so', 'libown.so', 'notes.so.txt', 'README'].filter((name) => directories(name).length > 0);
    expect(none).toEqual([]);
  });
});

describe('resolveTrees', () => {
  it("resolves each file of the trees through the index, leaves other machines' files to the other hooks, and warns of a name in two directories", async () => {
    const { root, tree, options } = await resolverTree(scratch());
    const resolution = await resolveTrees([tree], walkTrees([tree]), options, 'default', [], new InterruptPoll(undefined));
    const items = resolution.items.map((item) => {
      const file = item as FileItem;
      return [item.path.slice(tree.length + 1), item.kind, file.head?.kind ?? null, file.resolver === undefined ? null : file.resolver];
    });
    expect(items).toEqual([
      ['README', 'file', 'not-elf', null],
      ['bin/app', 'file', 'elf', { runpath: [{ dir: '$ORIGIN/../lib', hook: 'auto-patchelf' }], interpreter: INTERPRETER }],
      ['lib/libarm.so', 'file', 'elf', null],
      ['lib/libplain.so', 'file', 'elf', { runpath: [{ dir: '/opt/deps', hook: 'auto-patchelf' }], interpreter: null }],
    ]);
    expect(Object.fromEntries([...resolution.reports].map(([path, report]) => [path.slice(tree.length + 1), report]))).toEqual({
      'bin/app': {
        resolved: [{ directory: join(tree, 'lib'), entry: '$ORIGIN/../lib', names: ['libplain.so'] }],
        missing: [['libnowhere.so.3']],
        ignoredMissing: [],
        interpreter: null,
      },
      'lib/libplain.so': {
        // Written as the system under the root names it.
        resolved: [{ directory: join(root, 'opt/deps'), entry: '/opt/deps', names: ['libm.so.6'] }],
        missing: [],
        ignoredMissing: [],
        interpreter: null,
      },
    });
    expect(resolution.skipped).toEqual({ 'other-machine': 1 });
    expect(resolution.warnings).toEqual([
      `libm.so.6 is in ${join(root, 'opt/deps')} and in ${join(root, 'opt/deps2')}: ${join(root, 'opt/deps/libm.so.6')} is used (found first)`,
    ]);
    expect(resolution.libc).toEqual({ directory: join(root, 'lib64'), glibcOnly: false });
  });

  it('--ignore-missing moves a missing library to the ignored ones', async () => {
    const { tree, options } = await resolverTree(scratch());
    const resolution = await resolveTrees(
      [tree],
      walkTrees([tree]),
      { ...options, ignoredMissing: ignoreMissingMatcher(['libnowhere.*']) },
      'default',
      [],
      new InterruptPoll(undefined),
    );
    expect(resolution.reports.get(join(tree, 'bin/app'))).toMatchObject({ missing: [], ignoredMissing: [['libnowhere.so.3']] });
  });

  it('resolves nothing once Ctrl-C came, and hands the walk back as it was', async () => {
    const { tree, options } = await resolverTree(scratch());
    const flag = newInterruptFlag();
    raiseInterrupt(flag);
    const walked = [...walkTrees([tree])];
    const resolution = await resolveTrees([tree], walked, options, 'default', [], new InterruptPoll(flag));
    expect(resolution.items).toEqual(walked);
    expect([resolution.reports.size, resolution.warnings, resolution.libc]).toEqual([0, [], null]);
  });

  it('is what the batch writes: each resolved runpath, and the other machine’s file left alone', async () => {
    const { tree, options } = await resolverTree(scratch());
    const result = await patchTrees([tree], {
      hooks: [],
      semantics: 'default',
      dryRun: false,
      jobs: 1,
      cpuCount: 1,
      autoPatchelf: options,
    });
    const statuses = Object.fromEntries(
      result.outcomes.map((outcome) => [
        outcome.path.slice(tree.length + 1),
        outcome.status === 'skipped' ? outcome.reason : outcome.status,
      ]),
    );
    expect(statuses).toEqual({ README: 'not-elf', 'bin/app': 'patched', 'lib/libarm.so': 'no-hook', 'lib/libplain.so': 'patched' });
    const strings = async (path: string) => dynamicStrings(new Uint8Array(await readFile(join(tree, path))));
    expect(await strings('bin/app')).toMatchObject({ runpath: '$ORIGIN/../lib', needed: ['libnowhere.so.3', 'libplain.so', 'libc.so.6'] });
    expect((await strings('lib/libplain.so')).runpath).toBe('/opt/deps');
    expect(result.resolution?.reports.size).toBe(2);
  });
});
