// DynamicEditor and the runpath list helpers on hand-made entries: which tag a runpath is written
// with under each policy, where DT_NEEDED entries go, what reaches the planner.

import { describe, expect, it } from 'vitest';
import type { ByteString } from '../../src/elf/byte-string.js';
import { DT } from '../../src/elf/constants.js';
import type { CurrentEntry } from '../../src/plan/edit-facts.js';
import { CudaPatchelfError } from '../../src/errors/cuda-patchelf-error.js';
import { dedupeEntries, splitRunpath } from '../../src/elf/runpath-list.js';
import { DynamicEditor, addRunpathEntries, removeRunpathEntries, type RunpathTagPolicy } from '../../src/plan/dynamic-editor.js';
import { ascii } from '../helpers/byte-strings.js';

/** Names and runpaths are written here as ASCII text. */
const b = (text: string): ByteString => ascii<ByteString>(text);
const all = (texts: readonly string[]): ByteString[] => texts.map(b);

const NEEDED = (text: string, at: number): CurrentEntry => ({ d_tag: DT.DT_NEEDED, d_val: at, text: b(text) });
const STRTAB: CurrentEntry = { d_tag: DT.DT_STRTAB, d_val: 0x400, text: null };
const RPATH: CurrentEntry = { d_tag: DT.DT_RPATH, d_val: 30, text: b('/r') };
const RUNPATH: CurrentEntry = { d_tag: DT.DT_RUNPATH, d_val: 40, text: b('/u') };
const SONAME: CurrentEntry = { d_tag: DT.DT_SONAME, d_val: 50, text: b('libx.so.1') };

const tagsAndTexts = (editor: DynamicEditor): [number, string | null][] =>
  editor.wanted().entries.map((e) => [e.d_tag, 'text' in e ? e.text : null]);

describe('a tag given twice: the last is the one the loader uses', () => {
  const RUNPATH_TOO: CurrentEntry = { d_tag: DT.DT_RUNPATH, d_val: 60, text: b('/u2') };
  const SONAME_TOO: CurrentEntry = { d_tag: DT.DT_SONAME, d_val: 70, text: b('libx.so.2') };
  it('runpath and soname read the last', () => {
    const editor = new DynamicEditor([RUNPATH, SONAME, RUNPATH_TOO, SONAME_TOO], null);
    expect(editor.runpath()).toBe('/u2');
    expect(editor.soname()).toBe('libx.so.2');
  });

  it('setting the runpath gives every entry of it the value: the loader reads the new one whichever it takes', () => {
    const editor = new DynamicEditor([RUNPATH, RUNPATH_TOO], null);
    editor.setRunpath(b(`/new:${editor.runpath() ?? ''}`));
    expect(tagsAndTexts(editor)).toEqual([
      [DT.DT_RUNPATH, '/new:/u2'],
      [DT.DT_RUNPATH, '/new:/u2'],
    ]);
  });
});

describe('setRunpath: the tag each policy writes', () => {
  const cases: readonly { start: readonly CurrentEntry[]; policy: RunpathTagPolicy; tags: [number, string | null][] }[] = [
    {
      start: [STRTAB],
      policy: 'keep',
      tags: [
        [DT.DT_STRTAB, null],
        [DT.DT_RUNPATH, '/new'],
      ],
    },
    {
      start: [STRTAB],
      policy: 'rpath',
      tags: [
        [DT.DT_STRTAB, null],
        [DT.DT_RPATH, '/new'],
      ],
    },
    {
      start: [RPATH, STRTAB],
      policy: 'keep',
      tags: [
        [DT.DT_RPATH, '/new'],
        [DT.DT_STRTAB, null],
      ],
    },
    {
      start: [RPATH, STRTAB],
      policy: 'runpath',
      tags: [
        [DT.DT_RUNPATH, '/new'],
        [DT.DT_STRTAB, null],
      ],
    },
    { start: [RUNPATH], policy: 'rpath', tags: [[DT.DT_RPATH, '/new']] },
    // Both kinds: 'keep' sets both; a forced kind keeps the first entry, converted, and drops the other.
    {
      start: [RPATH, RUNPATH],
      policy: 'keep',
      tags: [
        [DT.DT_RPATH, '/new'],
        [DT.DT_RUNPATH, '/new'],
      ],
    },
    { start: [RPATH, RUNPATH], policy: 'runpath', tags: [[DT.DT_RUNPATH, '/new']] },
  ];
  it.each(cases)('$start.length entries, policy $policy', ({ start, policy, tags }) => {
    const editor = new DynamicEditor(start, null);
    editor.setRunpath(b('/new'), policy);
    expect(tagsAndTexts(editor)).toEqual(tags);
    expect(editor.runpath()).toBe('/new');
  });

  it('null removes DT_RUNPATH and DT_RPATH alike', () => {
    const editor = new DynamicEditor([RPATH, STRTAB, RUNPATH], null);
    editor.setRunpath(null);
    expect(tagsAndTexts(editor)).toEqual([[DT.DT_STRTAB, null]]);
    expect(editor.runpath()).toBeNull();
    expect(editor.runpathTag()).toBeNull();
  });
});

describe('reading', () => {
  it('prefers DT_RUNPATH, as the loader does, and names the tag of the runpath it reads (old ld wrote DT_RPATH first)', () => {
    const editor = new DynamicEditor([RPATH, RUNPATH, SONAME, NEEDED('liba.so', 1)], null);
    expect(editor.runpath()).toBe('/u');
    expect(editor.runpathTag()).toBe(DT.DT_RUNPATH);
    expect(editor.soname()).toBe('libx.so.1');
    expect(editor.needed()).toEqual(['liba.so']);
  });
});

describe('DT_NEEDED', () => {
  it('adds before the existing entries, as patchelf does, and not twice', () => {
    const editor = new DynamicEditor([SONAME, NEEDED('liba.so', 1), NEEDED('libb.so', 9)], null);
    editor.addNeeded(b('libnew.so'));
    editor.addNeeded(b('liba.so'));
    expect(tagsAndTexts(editor)).toEqual([
      [DT.DT_SONAME, 'libx.so.1'],
      [DT.DT_NEEDED, 'libnew.so'],
      [DT.DT_NEEDED, 'liba.so'],
      [DT.DT_NEEDED, 'libb.so'],
    ]);
  });

  it('adds first when there is none', () => {
    const editor = new DynamicEditor([STRTAB], null);
    editor.addNeeded(b('libnew.so'));
    expect(tagsAndTexts(editor)).toEqual([
      [DT.DT_NEEDED, 'libnew.so'],
      [DT.DT_STRTAB, null],
    ]);
  });

  it('removes every entry of a name', () => {
    const editor = new DynamicEditor([NEEDED('liba.so', 1), NEEDED('libb.so', 9), NEEDED('liba.so', 1)], null);
    editor.removeNeeded(b('liba.so'));
    expect(editor.needed()).toEqual(['libb.so']);
  });

  it('renames, and the version needs follow (versionNeedRenames)', () => {
    const editor = new DynamicEditor([NEEDED('liba.so', 1), NEEDED('libb.so', 9)], null);
    editor.replaceNeeded(b('liba.so'), b('liba.so.2'));
    editor.replaceNeeded(b('libmissing.so'), b('libz.so'));
    expect(editor.needed()).toEqual(['liba.so.2', 'libb.so']);
    expect([...editor.wanted().versionNeedRenames]).toEqual([['liba.so', 'liba.so.2']]);
  });
});

describe('what the planner gets', () => {
  it('kept entries as values, string entries as text with the index they replace', () => {
    const editor = new DynamicEditor([NEEDED('liba.so', 1), STRTAB, RUNPATH], null);
    editor.setRunpath(b('/new'));
    editor.addNeeded(b('libnew.so'));
    expect(editor.wanted().entries).toEqual([
      { d_tag: DT.DT_NEEDED, text: 'libnew.so', previous: null },
      { d_tag: DT.DT_NEEDED, text: 'liba.so', previous: 1 },
      { d_tag: DT.DT_STRTAB, d_val: 0x400 },
      { d_tag: DT.DT_RUNPATH, text: '/new', previous: 40 },
    ]);
  });

  it.each([
    ['a runpath', (editor: DynamicEditor) => editor.setRunpath(b('/a\0b'))],
    ['a new DT_NEEDED', (editor: DynamicEditor) => editor.addNeeded(b('lib\0.so'))],
    ['a renamed DT_NEEDED', (editor: DynamicEditor) => editor.replaceNeeded(b('liba.so'), b('lib\0.so'))],
  ])('refuses a NUL byte in %s as a usage error', (_what, operation) => {
    const editor = new DynamicEditor([NEEDED('liba.so', 1)], null);
    let caught: unknown;
    try {
      operation(editor);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(CudaPatchelfError);
    expect((caught as CudaPatchelfError).kind).toBe('usage');
  });
});

describe('runpath lists', () => {
  it.each([
    [null, []],
    ['', []],
    ['/a', ['/a']],
    ['/a::/b', ['/a', '', '/b']],
  ] as const)('splitRunpath(%j)', (value, dirs) => {
    expect(splitRunpath(value === null ? null : b(value))).toEqual(dirs);
  });

  it.each([
    ['/a:/b', ['/b', '/c'], 'prepend', false, '/b:/c:/a:/b'],
    ['/a:/b', ['/b', '/c'], 'prepend', true, '/b:/c:/a'],
    ['/a::/b', ['/c'], 'append', true, '/a:/b:/c'],
    [null, ['/c'], 'append', false, '/c'],
  ] as const)('addRunpathEntries(%j, %j, %s, dedupe %s) = %j', (value, dirs, position, dedupe, result) => {
    expect(addRunpathEntries(value === null ? null : b(value), all(dirs), position, dedupe)).toBe(result);
  });

  it('removes exact entries only', () => {
    expect(removeRunpathEntries(b('/a:/a/b:/c:/a'), all(['/a']))).toBe('/a/b:/c');
    expect(dedupeEntries(all(['/a', '', '/b', '/a']))).toEqual(['/a', '/b']);
  });
});
