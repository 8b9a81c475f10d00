// The stubs hook as Nixpkgs' removeStubsFromRunpathHook has it, the spelling of runpath entries, and
// what `check --nixpkgs-compat` counts as done (isOneHookRun); no disk.

import { describe, expect, it } from 'vitest';
import type { ByteString } from '../../src/elf/byte-string.js';
import { EM } from '../../src/elf/constants.js';
import { CudaPatchelfError } from '../../src/errors/cuda-patchelf-error.js';
import { cudaCompatHook, driverHook, removeStubsHook } from '../../src/hook-engine/builtin-hooks.js';
import { composeRunpath as composeBytes, isOneHookRun as isOneHookRunBytes, type Semantics } from '../../src/hook-engine/compose-hooks.js';
import type { FileFacts, Hook } from '../../src/hook-engine/hook.js';
import { orderHooks } from '../../src/hook-engine/order-hooks.js';
import { hookDirectory, normalizeRunpathEntry } from '../../src/hook-engine/runpath-entry.js';
import { NIXPKGS_STUBS_PATTERNS, stubsMatcher } from '../../src/hook-engine/stubs-pattern.js';
import { type AsText, ascii } from '../helpers/byte-strings.js';
import { rng, type Rng } from '../helpers/fuzz-mutations.js';

/** Runpaths, entries and patterns are written here as ASCII text. */
const b = (text: string): ByteString => ascii<ByteString>(text);
const hook = (written: AsText<Hook>): Hook => ascii<Hook>(written);
const composeRunpath = (hooks: readonly Hook[], file: FileFacts, current: string | null, semantics: Semantics, names?: number) =>
  composeBytes(hooks, file, current === null ? null : b(current), semantics, names);
const isOneHookRun = (hooks: readonly Hook[], file: FileFacts, current: string, names?: number): boolean =>
  isOneHookRunBytes(hooks, file, b(current), names);

const COMPAT = b('/nix/store/00000000000000000000000000000000-cuda_compat');
const DRIVER = '/run/opengl-driver/lib';
const STUBS = '/nix/store/11111111111111111111111111111111-cuda_cudart/lib/stubs';
const STUBS_OUTPUT = '/nix/store/22222222222222222222222222222222-cuda_cudart-12.8.90-stubs/lib';
const FILE: FileFacts = { relativePath: 'lib/libx.so', path: '/build/out/lib/libx.so', isSharedObject: true, machine: EM.EM_X86_64 };

const compose = (hooks: readonly Hook[], current: string | null, semantics: Semantics = 'default', file: FileFacts = FILE): string | null =>
  composeRunpath(orderHooks(hooks), file, current, semantics)?.value ?? null;

describe('remove-stubs, as Nixpkgs', () => {
  it('matches entries by store-path name, as shell patterns on the whole entry', () => {
    expect(NIXPKGS_STUBS_PATTERNS).toEqual(['*-cuda*/lib/stubs', '*-cuda*-stubs/lib*']);
    expect(removeStubsHook().transform).toEqual({ kind: 'replace-matching', patterns: NIXPKGS_STUBS_PATTERNS, dirs: [DRIVER] });
    const isStubs = stubsMatcher(NIXPKGS_STUBS_PATTERNS);
    for (const entry of [STUBS, STUBS_OUTPUT, `${STUBS_OUTPUT}64`, '/nix/store/x-cudatoolkit-12/lib/stubs'])
      expect(isStubs(b(entry)), entry).toBe(true);
    for (const entry of ['/usr/local/cuda/lib64/stubs', `${STUBS}/more`, '/opt/lib/stubs', DRIVER, '$ORIGIN'])
      expect(isStubs(b(entry)), entry).toBe(false);
  });

  it('replaces the first stubs entry with the driver directory, even with the driver hook off, and drops the others', () => {
    expect(compose([removeStubsHook()], `$ORIGIN:${STUBS}:/opt/lib:${STUBS_OUTPUT}`)).toBe(`$ORIGIN:${DRIVER}:/opt/lib`);
    expect(compose([removeStubsHook()], `$ORIGIN:${STUBS}:/opt/lib:${STUBS_OUTPUT}`, 'nixpkgs-compat')).toBe(`$ORIGIN:${DRIVER}:/opt/lib`);
    // The driver directory already before the stubs: the stubs entries just go.
    expect(compose([removeStubsHook()], `${DRIVER}:${STUBS}:/opt/lib`, 'nixpkgs-compat')).toBe(`${DRIVER}:/opt/lib`);
    // After them, Nixpkgs still replaces the first one: the driver directory then appears twice (default: once).
    expect(compose([removeStubsHook()], `${STUBS}:${DRIVER}`, 'nixpkgs-compat')).toBe(`${DRIVER}:${DRIVER}`);
    expect(compose([removeStubsHook()], `${STUBS}:${DRIVER}`)).toBe(DRIVER);
    // With the driver hook on, its entry comes first and the stubs entry simply goes.
    expect(compose([driverHook(), removeStubsHook()], `${STUBS}:/opt/lib`, 'nixpkgs-compat')).toBe(`${DRIVER}:/opt/lib`);
    expect(compose([driverHook(), cudaCompatHook(COMPAT), removeStubsHook()], STUBS, 'nixpkgs-compat')).toBe(`${COMPAT}/compat:${DRIVER}`);
  });

  it('takes its driver directory from the driver link, per machine by default', () => {
    expect(compose([removeStubsHook({ driverLink: b('/opt/gl') })], STUBS)).toBe('/opt/gl/lib');
    const i386 = { ...FILE, machine: EM.EM_386 };
    expect(compose([removeStubsHook()], STUBS, 'default', i386)).toBe('/run/opengl-driver-32/lib');
    expect(compose([removeStubsHook()], STUBS, 'nixpkgs-compat', i386)).toBe(DRIVER);
  });

  it("in nixpkgs-compat reads the runpath as Nixpkgs' mapfile does: a trailing ':' goes", () => {
    // The driver hook leaves "DRIVER:" on a file without a runpath; the stubs hook writes it back without the ':'.
    expect(compose([driverHook()], null, 'nixpkgs-compat')).toBe(`${DRIVER}:`);
    expect(compose([driverHook(), removeStubsHook()], null, 'nixpkgs-compat')).toBe(DRIVER);
    expect(compose([removeStubsHook()], 'a::b:', 'nixpkgs-compat')).toBe('a::b');
    expect(compose([removeStubsHook()], ':', 'nixpkgs-compat')).toBe('');
    expect(compose([removeStubsHook()], null, 'nixpkgs-compat')).toBe('');
  });

  it('takes other patterns, and refuses one that would match every entry', () => {
    expect(compose([removeStubsHook({ patterns: [b('*/lib64/stubs')] })], `/usr/local/cuda/lib64/stubs:${STUBS}`)).toBe(
      `${DRIVER}:${STUBS}`,
    );
    expect(compose([removeStubsHook({ patterns: [b('/opt/?/stubs')] })], '/opt/a/stubs:/opt/ab/stubs')).toBe(`${DRIVER}:/opt/ab/stubs`);
    // Regular-expression characters are plain characters in a pattern.
    expect(compose([removeStubsHook({ patterns: [b('/opt/a.b+(c)/stubs')] })], '/opt/a.b+(c)/stubs:/opt/aXb+(c)/stubs')).toBe(
      `${DRIVER}:/opt/aXb+(c)/stubs`,
    );
    for (const bad of ['', '/', '*', '/*', '**/', '?']) {
      expect(() => stubsMatcher([b(bad)]), bad).toThrow(CudaPatchelfError);
      expect(() => stubsMatcher([b(bad)]), bad).toThrow(/would match every runpath entry/);
    }
  });
});

describe('runpath entries', () => {
  it('have one spelling', () => {
    const cases: Array<[string, string]> = [
      ['/run/opengl-driver//lib', '/run/opengl-driver/lib'],
      ['/run/opengl-driver/lib/', '/run/opengl-driver/lib'],
      ['//a/./b/.//', '/a/b'],
      ['/', '/'],
      ['///', '/'],
      ['$ORIGIN/../lib/', '$ORIGIN/../lib'],
      ['', ''],
    ];
    for (const [entry, spelled] of cases) expect(normalizeRunpathEntry(b(entry)), entry).toBe(spelled);
  });

  it('dedupe by that spelling, first occurrence wins', () => {
    expect(compose([driverHook()], '/run/opengl-driver//lib:/opt/lib/:/opt/lib')).toBe(`${DRIVER}:/opt/lib/`);
    expect(compose([driverHook(b('/run/opengl-driver'))], '/run/opengl-driver/lib/')).toBe(DRIVER);
    // nixpkgs-compat keeps every entry as it is.
    expect(compose([driverHook()], '/run/opengl-driver//lib', 'nixpkgs-compat')).toBe(`${DRIVER}:/run/opengl-driver//lib`);
  });

  it('are taken from people only absolute (or under $ORIGIN where allowed), and normalised', () => {
    expect(hookDirectory('/run/opengl-driver/', '--driver-link', false)).toBe('/run/opengl-driver');
    expect(hookDirectory('$ORIGIN/../lib', 'x', true)).toBe('$ORIGIN/../lib');
    expect(() => hookDirectory('$ORIGIN/../lib', '--cuda-compat', false)).toThrow(
      /--cuda-compat "\$ORIGIN\/..\/lib" is relative; it must be an absolute path/,
    );
    expect(() => hookDirectory('', '--driver-link', false)).toThrow(/--driver-link is empty/);
    expect(() => hookDirectory('./cc', '--cuda-compat', false)).toThrow(/is relative/);
    expect(() => hookDirectory('/a:/b', '--cuda-compat', false)).toThrow(/contains ':'/);
  });
});

describe('isOneHookRun (check --nixpkgs-compat)', () => {
  const hooks = orderHooks([driverHook(), cudaCompatHook(COMPAT)]);
  const once = (current: string | null, h: readonly Hook[] = hooks): string =>
    composeRunpath(h, FILE, current, 'nixpkgs-compat')?.value ?? '';

  it('is true of what one run of the hooks makes of any runpath, twice included', () => {
    const withStubs = orderHooks([driverHook(), cudaCompatHook(COMPAT), removeStubsHook()]);
    for (const start of [null, '', '$ORIGIN', `$ORIGIN:${DRIVER}`, 'a::b', `${STUBS}:/opt`]) {
      expect(isOneHookRun(hooks, FILE, once(start)), String(start)).toBe(true);
      expect(isOneHookRun(hooks, FILE, once(once(start))), String(start)).toBe(true);
      expect(isOneHookRun(withStubs, FILE, once(start, withStubs)), String(start)).toBe(true);
    }
  });

  it("counts a hard-linked file's names: one run gives each hook's entries once per name", () => {
    const thrice = (current: string | null): string => composeRunpath(hooks, FILE, current, 'nixpkgs-compat', 3)?.value ?? '';
    for (const start of [null, '$ORIGIN', `$ORIGIN:${DRIVER}`]) {
      expect(thrice(start), String(start)).toMatch(new RegExp(`^(${COMPAT}/compat:){3}(${DRIVER}:){3}`));
      expect(isOneHookRun(hooks, FILE, thrice(start), 3), String(start)).toBe(true);
      expect(isOneHookRun(hooks, FILE, thrice(thrice(start)), 3), String(start)).toBe(true);
      expect(isOneHookRun(hooks, FILE, thrice(start), 1), String(start)).toBe(false);
      expect(isOneHookRun(hooks, FILE, once(start), 3), String(start)).toBe(false);
    }
  });

  it('is false where the hooks entries do not lead in hook order, or the rest would change', () => {
    for (const current of ['', '$ORIGIN', DRIVER, `${DRIVER}:${COMPAT}/compat`, `$ORIGIN:${COMPAT}/compat:${DRIVER}`, `${COMPAT}/compat`]) {
      expect(isOneHookRun(hooks, FILE, current), current).toBe(false);
    }
    // The stubs hook would still drop the stubs entry.
    const withStubs = orderHooks([driverHook(), cudaCompatHook(COMPAT), removeStubsHook()]);
    expect(isOneHookRun(withStubs, FILE, `${COMPAT}/compat:${DRIVER}:${STUBS}`)).toBe(false);
  });
});

describe('a file with many names, against running each hook once per name', () => {
  // The reference: every hook listed once per name and composed over one name, so each run is its own
  // step, as in Nixpkgs; and every split of the runpath tried. Seeded: a failure replays from its case.
  // 1,000 cases keep the unit tier fast; with this pool of hooks the test has passed at 20,000.
  const extraHooks: Hook[] = [
    hook({ name: 'append', transform: { kind: 'append', dirs: ['/z'] }, files: {}, precedes: [], follows: [] }),
    hook({ name: 'append-stubs', transform: { kind: 'append', dirs: [STUBS] }, files: {}, precedes: [], follows: [] }),
    hook({ name: 'drop-build', transform: { kind: 'remove-matching', fragment: '/build/' }, files: {}, precedes: [], follows: [] }),
    hook({
      name: 'two-for-stubs',
      transform: { kind: 'replace-matching', patterns: NIXPKGS_STUBS_PATTERNS, dirs: ['/r1', '/r2'] },
      files: {},
      precedes: [],
      follows: [],
    }),
    hook({ name: 'two-first', transform: { kind: 'prepend', dirs: ['/p1', '/p2'] }, files: {}, precedes: [], follows: [] }),
    hook({ name: 'two-last', transform: { kind: 'append', dirs: ['/z', '/y'] }, files: {}, precedes: [], follows: [] }),
    // Replacements that match the pattern themselves, and a filter that drops what other hooks add.
    hook({
      name: 'stubs-for-stubs',
      transform: { kind: 'replace-matching', patterns: NIXPKGS_STUBS_PATTERNS, dirs: [STUBS_OUTPUT, '/r1'] },
      files: {},
      precedes: [],
      follows: [],
    }),
    hook({ name: 'drop-compat', transform: { kind: 'remove-matching', fragment: 'cuda_compat' }, files: {}, precedes: [], follows: [] }),
  ];
  const hookPool = [driverHook(), cudaCompatHook(COMPAT), removeStubsHook(), ...extraHooks];
  const entryPool = [`${COMPAT}/compat`, DRIVER, STUBS, STUBS_OUTPUT, '$ORIGIN', '', '/a', '/build/x', '/z', '/r1', '/p2'];
  const runEachName = (hooks: readonly Hook[], names: number): Hook[] => hooks.flatMap((hook) => Array.from({ length: names }, () => hook));
  const referenceCompose = (hooks: readonly Hook[], base: string | null, names: number): string | undefined =>
    composeRunpath(runEachName(hooks, names), FILE, base, 'nixpkgs-compat', 1)?.value;
  const referenceIsOneRun = (hooks: readonly Hook[], current: string, names: number): boolean => {
    const entries = current.split(':');
    for (let lead = 0; lead <= entries.length; lead++) {
      for (let trail = 0; lead + trail <= entries.length; trail++) {
        if (referenceCompose(hooks, entries.slice(lead, entries.length - trail).join(':'), names) === current) return true;
      }
    }
    return false;
  };
  const randomRunpath = (random: Rng): string => Array.from({ length: random.below(6) }, () => random.pick(entryPool)).join(':');

  it('composes the same runpath, and answers the same for what one run makes, near misses and anything', () => {
    let oneRuns = 0;
    for (let round = 0; round < 1000; round++) {
      const random = rng(0x51ab + round);
      const hooks = hookPool.filter(() => random.below(2) === 1).sort(() => random.below(3) - 1);
      const names = 1 + random.below(3);
      const base = randomRunpath(random);
      const composed = composeRunpath(hooks, FILE, base, 'nixpkgs-compat', names);
      expect(composed?.value, `round ${round}`).toBe(referenceCompose(hooks, base, names));
      expect(
        composed?.entries.map((entry) => entry.hook),
        `round ${round}`,
      ).toEqual(composeRunpath(runEachName(hooks, names), FILE, base, 'nixpkgs-compat', 1)?.entries.map((entry) => entry.hook));
      const madeByOneRun = composed?.value ?? '';
      const entries = madeByOneRun.split(':');
      entries.splice(random.below(entries.length + 1), random.below(2), ...(random.below(2) === 1 ? [random.pick(entryPool)] : []));
      for (const current of [madeByOneRun, entries.join(':'), randomRunpath(random)]) {
        const expected = referenceIsOneRun(hooks, current, names);
        if (expected) oneRuns++;
        expect(isOneHookRun(hooks, FILE, current, names), `round ${round}: ${JSON.stringify(current)} with ${names} names`).toBe(expected);
      }
    }
    // Both answers occur often enough to matter.
    expect(oneRuns).toBeGreaterThan(1000);
    expect(oneRuns).toBeLessThan(2000);
  });

  it('answers for a file with hundreds of names', () => {
    const hooks = orderHooks([driverHook(), cudaCompatHook(COMPAT), removeStubsHook()]);
    const names = 300;
    const oneRun = composeRunpath(hooks, FILE, '$ORIGIN:/a', 'nixpkgs-compat', names)?.value ?? '';
    expect(isOneHookRun(hooks, FILE, oneRun, names)).toBe(true);
    expect(isOneHookRun(hooks, FILE, `${oneRun}:${STUBS}`, names)).toBe(false);
    expect(isOneHookRun(hooks, FILE, oneRun, names + 1)).toBe(false);
  });
});
