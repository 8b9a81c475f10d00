// planEdit on the corpus, fully in memory: the tier each edit gets, the result read back through the
// project's own reader, every prefix of the writes (what a kill can leave) still reading as the old or
// the new file, no replaced string left in the bytes, and the same edit again planning nothing.

import { describe, expect, it } from 'vitest';
import type { Tier } from '../../src/plan/plan.js';
import { CORPUS, type CorpusFile } from './corpus-table.js';
import { corpusBytes } from './helpers/corpus.js';
import {
  applyInMemory,
  applyPlanInMemory,
  contains,
  dynamicStrings,
  planOn,
  type DynamicStrings,
  type Operations,
} from './helpers/plan-in-memory.js';
import { bytes } from '../helpers/byte-strings.js';

const COMPAT = '/nix/store/00000000000000000000000000000000-cuda_compat-12.8/lib:/run/opengl-driver/lib';

interface Edit {
  readonly label: string;
  readonly operations: Operations;
  /** The tier by file name; files not named get `otherwise`. */
  readonly tier: { readonly otherwise: Tier } & Readonly<Record<string, Tier>>;
  readonly expect: (file: CorpusFile) => Partial<DynamicStrings>;
}

// The new runpath goes where the file has one (DT_RPATH stays DT_RPATH) and is DT_RUNPATH otherwise.
const runpathOf = (file: CorpusFile, value: string | null): Partial<DynamicStrings> =>
  file.rpath !== null ? { rpath: value, runpath: null } : { runpath: value, rpath: null };

const EDITS: readonly Edit[] = [
  {
    label: 'a shorter runpath',
    operations: (editor) => editor.setRunpath(bytes('/a')),
    // The old string's bytes take it in place; a file without a runpath has no bytes to reuse.
    tier: { otherwise: 'in-place', 'x86_64-lib-plain.so': 'append' },
    expect: (file) => runpathOf(file, '/a'),
  },
  {
    label: 'a long CUDA runpath',
    operations: (editor) => editor.setRunpath(bytes(COMPAT)),
    tier: { otherwise: 'append' },
    expect: (file) => runpathOf(file, COMPAT),
  },
  {
    label: 'no runpath',
    operations: (editor) => editor.setRunpath(null),
    tier: { otherwise: 'in-place', 'x86_64-lib-plain.so': 'noop' },
    expect: () => ({ runpath: null, rpath: null }),
  },
  {
    label: 'DT_RUNPATH forced (patchelf --set-rpath)',
    operations: (editor) => editor.setRunpath(bytes('/opt'), 'runpath'),
    tier: { otherwise: 'in-place', 'x86_64-lib-plain.so': 'append' },
    expect: () => ({ runpath: '/opt', rpath: null }),
  },
  {
    label: 'one more DT_NEEDED',
    operations: (editor) => editor.addNeeded(bytes('libcuda.so.1')),
    tier: { otherwise: 'append' },
    expect: (file) => ({ needed: ['libcuda.so.1', ...file.needed] }),
  },
];

const stringsBefore = (file: CorpusFile): DynamicStrings => ({
  needed: file.needed,
  soname: file.soname,
  runpath: file.runpath,
  rpath: file.rpath,
});

describe.each(CORPUS)('$name', (file) => {
  describe.each(EDITS)('$label', (edit) => {
    const tier = edit.tier[file.name] ?? edit.tier.otherwise;
    const wanted: DynamicStrings = { ...stringsBefore(file), ...edit.expect(file) };

    it(`plans the ${tier} tier and reads back as asked`, async () => {
      const bytes = corpusBytes(file.name);
      const { plan } = await planOn(bytes, edit.operations);
      expect(plan.tier).toBe(tier);
      if (tier === 'noop') {
        expect(plan.writes).toEqual([]);
        return;
      }
      expect(plan.newSize).toBeGreaterThanOrEqual(bytes.length);
      if (tier === 'in-place') expect(plan.newSize).toBe(bytes.length);
      expect(await dynamicStrings(applyPlanInMemory(bytes, plan))).toEqual(wanted);
    });

    // Field by field: a tag conversion (DT_RPATH to DT_RUNPATH) goes out one write after the string it
    // reuses in place, so for that one write the old tag holds the new search path.
    it('leaves the old or the new search path and DT_NEEDED list after every prefix of its writes', async () => {
      const bytes = corpusBytes(file.name);
      const { plan } = await planOn(bytes, edit.operations);
      const old = stringsBefore(file);
      const searchPath = (strings: DynamicStrings): string | null => strings.runpath ?? strings.rpath;
      const furthest = Math.max(bytes.length, ...plan.writes.map((write) => write.offset + write.bytes.length));
      for (let count = 0; count < plan.writes.length; count++) {
        const read = await dynamicStrings(applyInMemory(bytes, plan.writes.slice(0, count), furthest));
        const at = `after ${count} writes, before a ${plan.writes[count]?.phase} write`;
        expect([searchPath(old), searchPath(wanted)], at).toContain(searchPath(read));
        expect([old.needed, wanted.needed], at).toContainEqual(read.needed);
        expect(read.soname, at).toBe(file.soname);
      }
    });

    it('leaves no replaced string in the file, and plans nothing the second time', async () => {
      const bytes = corpusBytes(file.name);
      const edited = applyPlanInMemory(bytes, (await planOn(bytes, edit.operations)).plan);
      for (const value of [file.runpath, file.rpath]) {
        if (value !== null && value !== wanted.runpath && value !== wanted.rpath) expect(contains(edited, value), value).toBe(false);
      }
      expect((await planOn(edited, edit.operations)).plan.tier).toBe('noop');
    });
  });
});
