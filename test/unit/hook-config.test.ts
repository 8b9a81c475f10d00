// parseHookConfig on config texts: the hooks a valid file gives, and a usage error naming the file and
// the field for each kind of mistake.

import { describe, expect, it } from 'vitest';
import { CudaPatchelfError } from '../../src/errors/cuda-patchelf-error.js';
import { parseHookConfig } from '../../src/hook-engine/hook-config.js';

const FILE = '/etc/hooks.json';
const config = (...hooks: unknown[]): string => JSON.stringify({ hooks });

describe('a valid config', () => {
  it('gives one hook per entry, with defaults for what is left out', () => {
    const hooks = parseHookConfig(
      FILE,
      config(
        { name: 'origin', prepend: ['$ORIGIN/../lib'], include: ['lib/**'], precedes: ['driver'] },
        { name: 'tail', append: ['/opt/lib'], sharedObjectsOnly: true, follows: ['*'] },
        { name: 'no-stubs', removeMatching: '/stubs' },
      ),
    );
    expect(hooks).toEqual([
      {
        name: 'origin',
        transform: { kind: 'prepend', dirs: ['$ORIGIN/../lib'] },
        files: { include: ['lib/**'], exclude: [], sharedObjectsOnly: false },
        precedes: ['driver'],
        follows: [],
      },
      {
        name: 'tail',
        transform: { kind: 'append', dirs: ['/opt/lib'] },
        files: { include: [], exclude: [], sharedObjectsOnly: true },
        precedes: [],
        follows: ['*'],
      },
      {
        name: 'no-stubs',
        transform: { kind: 'remove-matching', fragment: '/stubs' },
        files: { include: [], exclude: [], sharedObjectsOnly: false },
        precedes: [],
        follows: [],
      },
    ]);
  });

  it('may have no hooks at all', () => {
    expect(parseHookConfig(FILE, config())).toEqual([]);
  });
});

describe.each([
  ['not JSON', '{ hooks: ', /not valid JSON/],
  ['no hooks array', '{"hook": []}', /"hooks" array/],
  ['an entry that is not an object', config(3), /hooks\[0\] is not an object/],
  ['an unknown field', config({ name: 'a', prepend: ['/a'], prepnd: ['/b'] }), /unknown field: prepnd/],
  ['a name with a space', config({ name: 'a b', prepend: ['/a'] }), /hooks\[0\]\.name/],
  ['two transforms', config({ name: 'a', prepend: ['/a'], append: ['/b'] }), /exactly one of prepend, append, removeMatching/],
  ['no transform', config({ name: 'a' }), /exactly one of/],
  ['an empty directory list', config({ name: 'a', prepend: [] }), /prepend needs directories/],
  ['directories that are not strings', config({ name: 'a', append: [1] }), /append must be an array of strings/],
  ['an empty removeMatching', config({ name: 'a', removeMatching: '' }), /removeMatching must be a non-empty string/],
  [
    'a non-boolean sharedObjectsOnly',
    config({ name: 'a', prepend: ['/a'], sharedObjectsOnly: 'yes' }),
    /sharedObjectsOnly must be true or false/,
  ],
  ['a directory with a colon', config({ name: 'a', prepend: ['/a:/b'] }), /hook "a"/],
  // before/after named the run order: refused, with the position that gives the same runpath.
  [
    'a prepending hook with the old after',
    config({ name: 'a', prepend: ['/a'], after: ['driver'] }),
    /^hook config: hook "a": "after" is no longer read \(it named the order hooks run in, not where their entries go\); write "precedes": \["driver"\] \(where its entries go in the runpath\)$/,
  ],
  [
    'a prepending hook with the old before',
    config({ name: 'a', prepend: ['/a'], before: ['b'] }),
    /"before" is no longer read .* write "follows": \["b"\]/,
  ],
  [
    'an appending hook with the old after',
    config({ name: 'a', append: ['/a'], after: ['*'] }),
    /"after" is no longer read .* write "follows": \["\*"\]/,
  ],
  [
    'an appending hook with the old before',
    config({ name: 'a', append: ['/a'], before: ['b'] }),
    /"before" is no longer read .* write "precedes": \["b"\]/,
  ],
  [
    'a removeMatching hook with the old after',
    config({ name: 'a', removeMatching: '/build/', after: ['*'] }),
    /"after" is no longer read .* leave it out: a removeMatching hook runs after every hook that adds entries/,
  ],
  [
    'a removeMatching hook placed',
    config({ name: 'a', removeMatching: '/build/', follows: ['driver'] }),
    /hook "a": a removeMatching hook adds no entries to place; leave "follows" out/,
  ],
  [
    'a hook placed against remove-stubs',
    config({ name: 'a', prepend: ['/a'], precedes: ['remove-stubs'] }),
    /hook "a": precedes names "remove-stubs", which adds no entries of its own/,
  ],
  ['precedes as a string', config({ name: 'a', prepend: ['/a'], precedes: 'driver' }), /hook "a": precedes must be an array of strings/],
])('%s', (_what, text, message) => {
  it('is a usage error naming the file', () => {
    let caught: unknown;
    try {
      parseHookConfig(FILE, text);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(CudaPatchelfError);
    const error = caught as CudaPatchelfError;
    expect(error.kind).toBe('usage');
    expect(error.message).toMatch(message);
    expect(error.message).toMatch(/^hook config: /);
    expect(error.file).toBe(FILE);
  });
});
