// parseHookConfig on config texts: the hooks a valid file gives (every field kept, defaults for what is
// left out, directories as byte strings in one spelling), and for each kind of mistake one usage error,
// one line, naming the file and the field.

import { describe, expect, it } from 'vitest';
import { CudaPatchelfError } from '../../src/errors/cuda-patchelf-error.js';
import { parseHookConfig } from '../../src/hook-engine/hook-config.js';

const FILE = '/etc/cuda-patchelf/hooks.json';
const config = (...hooks: unknown[]): string => JSON.stringify({ hooks });

describe('a valid config', () => {
  it('gives one hook per entry, keeping every field, with defaults for what is left out', () => {
    const hooks = parseHookConfig(
      FILE,
      config(
        { name: 'origin-lib', prepend: ['$ORIGIN/../lib'], include: ['lib/**'], precedes: ['driver'] },
        { name: 'tail', append: ['/opt/a', '/opt/ünï'], exclude: ['bin/**'], sharedObjectsOnly: true, follows: ['*'] },
        { name: 'drop.build_dir-1', removeMatching: '/build/' },
      ),
    );
    expect(hooks).toEqual([
      {
        name: 'origin-lib',
        transform: { kind: 'prepend', dirs: ['$ORIGIN/../lib'] },
        files: { include: ['lib/**'], exclude: [], sharedObjectsOnly: false },
        precedes: ['driver'],
        follows: [],
      },
      {
        name: 'tail',
        // Directories are byte strings: the UTF-8 bytes of the text, one char per byte.
        transform: { kind: 'append', dirs: ['/opt/a', Buffer.from('/opt/ünï', 'utf8').toString('latin1')] },
        files: { include: [], exclude: ['bin/**'], sharedObjectsOnly: true },
        precedes: [],
        follows: ['*'],
      },
      {
        name: 'drop.build_dir-1',
        transform: { kind: 'remove-matching', fragment: '/build/' },
        files: { include: [], exclude: [], sharedObjectsOnly: false },
        precedes: [],
        follows: [],
      },
    ]);
  });

  it('may have no hooks at all', () => {
    expect(parseHookConfig(FILE, '{ "hooks": [] }')).toEqual([]);
  });

  it('brings directories to one spelling: no doubled slashes, no "." components, no trailing slash', () => {
    const [spelled] = parseHookConfig(FILE, config({ name: 'a', prepend: ['/opt//x/', '${ORIGIN}/./lib/', '$ORIGIN', '/'] }));
    expect(spelled?.transform).toEqual({ kind: 'prepend', dirs: ['/opt/x', '${ORIGIN}/lib', '$ORIGIN', '/'] });
  });
});

/** The mistake, the config text, and what the message must say. */
const MISTAKES: Array<[string, string, RegExp]> = [
  ['not JSON', '{ "hooks": [ ', /not valid JSON/],
  ['a trailing comma', '{ "hooks": [], }', /not valid JSON/],
  ['an unquoted key', '{ hooks: ', /not valid JSON/],
  ['no hooks array', '{}', /"hooks" array/],
  ['a misspelled hooks array', '{"hook": []}', /"hooks" array/],
  ['hooks not an array', '{ "hooks": { "name": "a" } }', /"hooks" array/],
  ['a top-level array', '[]', /"hooks" array/],
  ['null', 'null', /"hooks" array/],
  ['a hook that is a number', config(42), /hooks\[0\] is not an object/],
  ['a hook that is null', config({ name: 'ok', prepend: ['/x'] }, null), /hooks\[1\] is not an object/],
  ['an unknown field', config({ name: 'a', prepend: ['/x'], includes: ['lib/**'] }), /unknown field: includes/],
  ['two transforms', config({ name: 'a', prepend: ['/x'], append: ['/y'] }), /"a" needs exactly one of prepend, append, removeMatching/],
  ['prepend and removeMatching', config({ name: 'a', prepend: ['/x'], removeMatching: '/y' }), /"a" needs exactly one of/],
  ['no transform', config({ name: 'a', include: ['lib/**'] }), /"a" needs exactly one of/],
  ['a name with a space', config({ name: 'my hook', prepend: ['/x'] }), /hooks\[0\]\.name must be/],
  ['an empty name', config({ name: '', prepend: ['/x'] }), /hooks\[0\]\.name must be/],
  ['a numeric name', config({ name: 7, prepend: ['/x'] }), /hooks\[0\]\.name must be/],
  ['a missing name', config({ prepend: ['/x'] }), /hooks\[0\]\.name must be/],
  ['a name with a slash', config({ name: 'a/b', prepend: ['/x'] }), /hooks\[0\]\.name must be/],
  ['a non-string directory', config({ name: 'a', prepend: [1] }), /"a": prepend must be an array of strings/],
  ['directories as a string', config({ name: 'a', append: '/x' }), /"a": append must be an array of strings/],
  ['a null directory', config({ name: 'a', append: [null] }), /"a": append must be an array of strings/],
  ["a ':' in a directory", config({ name: 'a', prepend: ['/x:/y'] }), /"a": prepend entry "\/x:\/y" contains ':', the runpath separator/],
  [
    'an empty directory',
    config({ name: 'a', prepend: [''] }),
    /"a": prepend entry is empty; it must be an absolute path or one starting with \$ORIGIN/,
  ],
  [
    'a relative directory',
    config({ name: 'a', prepend: ['./cc'] }),
    /"a": prepend entry "\.\/cc" is relative; it must be an absolute path or one starting with \$ORIGIN/,
  ],
  ['a bare name', config({ name: 'a', append: ['lib'] }), /"a": append entry "lib" is relative/],
  ['$ORIGIN glued to a name', config({ name: 'a', append: ['$ORIGINAL/lib'] }), /"a": append entry "\$ORIGINAL\/lib" is relative/],
  ['no directories to prepend', config({ name: 'a', prepend: [] }), /"a": prepend needs directories/],
  ['no directories to append', config({ name: 'a', append: [] }), /"a": append needs directories/],
  ['a numeric removeMatching', config({ name: 'a', removeMatching: 3 }), /"a": removeMatching must be a non-empty string/],
  ['an empty removeMatching', config({ name: 'a', removeMatching: '' }), /"a": removeMatching must be a non-empty string/],
  ['include as a string', config({ name: 'a', prepend: ['/x'], include: 'lib/**' }), /"a": include must be an array of strings/],
  ['a non-string exclude', config({ name: 'a', prepend: ['/x'], exclude: [1] }), /"a": exclude must be an array of strings/],
  ['precedes as a string', config({ name: 'a', prepend: ['/x'], precedes: 'driver' }), /hook "a": precedes must be an array of strings/],
  ['a non-string follows', config({ name: 'a', prepend: ['/x'], follows: [true] }), /"a": follows must be an array of strings/],
  [
    'sharedObjectsOnly as a string',
    config({ name: 'a', prepend: ['/x'], sharedObjectsOnly: 'yes' }),
    /"a": sharedObjectsOnly must be true or false/,
  ],
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
];

it.each(MISTAKES)('%s: one usage error, one line, naming the file', (_mistake, text, message) => {
  let caught: unknown;
  try {
    parseHookConfig(FILE, text);
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(CudaPatchelfError);
  const error = caught as CudaPatchelfError;
  expect(error.kind).toBe('usage');
  expect(error.file).toBe(FILE);
  expect(error.message).toMatch(/^hook config: /);
  expect(error.message).toMatch(message);
  expect(error.message).not.toContain('\n');
  expect(error.describe()).toMatch(new RegExp(`^${FILE.replace(/[./]/g, '\\$&')}: hook config: `));
});
