// The hook engine without a disk: orderHooks (constraints first, declaration order only where they leave
// the order open) and composeRunpath (the Nixpkgs order, the default's dedupe, --nixpkgs-compat's quirks,
// per-machine directories, files a hook must not touch, and which hook put each entry there).

import { describe, expect, it } from 'vitest';
import { EM } from '../../src/elf/constants.js';
import { CudaPatchelfError } from '../../src/errors/cuda-patchelf-error.js';
import { cudaCompatHook, driverHook, removeStubsHook } from '../../src/hook-engine/builtin-hooks.js';
import type { Semantics } from '../../src/hook-engine/compose-hooks.js';
import type { FileFacts, Hook } from '../../src/hook-engine/hook.js';
import { orderHooks } from '../../src/hook-engine/order-hooks.js';
import { hookDirectory } from '../../src/hook-engine/runpath-entry.js';
import { type AsText, bytes } from '../helpers/byte-strings.js';
import { b, composeAfterResolver, composeRunpath, hookOf } from './helpers/hooks-as-text.js';
import { permutations } from './helpers/permutations.js';

const COMPAT = b('/nix/store/00000000000000000000000000000000-cuda_compat');
const DRIVER = '/run/opengl-driver/lib';
const STUBS = '/nix/store/11111111111111111111111111111111-cuda_cudart/lib/stubs';

function file(overrides: Partial<FileFacts> = {}): FileFacts {
  return {
    relativePath: 'lib/libcudart.so.11.0',
    path: '/build/out/lib/libcudart.so.11.0',
    isSharedObject: true,
    machine: EM.EM_X86_64,
    ...overrides,
  };
}

function hook(name: string, fields: AsText<Partial<Omit<Hook, 'name'>>> = {}): Hook {
  return hookOf({ name, transform: { kind: 'prepend', dirs: [`/${name}`] }, files: {}, precedes: [], follows: [], ...fields });
}

const names = (hooks: readonly Hook[]): string[] => hooks.map((h) => h.name);

function compose(
  hooks: readonly Hook[],
  current: string | null,
  semantics: Semantics = 'default',
  facts: FileFacts = file(),
): string | null {
  return composeRunpath(orderHooks(hooks), facts, current, semantics)?.value ?? null;
}

/** The usage error orderHooks throws, or a failure when it throws something else or nothing. */
function usageError(run: () => unknown): CudaPatchelfError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(CudaPatchelfError);
    expect((error as CudaPatchelfError).kind).toBe('usage');
    return error as CudaPatchelfError;
  }
  throw new Error('expected a usage error, nothing was thrown');
}

describe('orderHooks', () => {
  const builtins = (): Hook[] => [driverHook(), cudaCompatHook(COMPAT), removeStubsHook()];

  it.each(permutations([0, 1, 2]).map((order) => ({ order })))(
    'driver, cuda-compat, remove-stubs declared as $order: same order, same runpath',
    ({ order }) => {
      const declared = order.map((i) => builtins()[i] as Hook);
      const ordered = orderHooks(declared);
      expect(names(ordered)).toEqual(['driver', 'cuda-compat', 'remove-stubs']);
      const composed = composeRunpath(ordered, file(), `$ORIGIN:${STUBS}:/opt/lib`, 'default');
      expect(composed?.value).toBe(`${COMPAT}/compat:${DRIVER}:$ORIGIN:/opt/lib`);
      expect(composed?.applied).toEqual(['driver', 'cuda-compat', 'remove-stubs']);
    },
  );

  it('keeps declaration order among hooks the constraints leave free: each later hook prepends to what the earlier ones made', () => {
    expect(names(orderHooks([hook('a'), hook('b'), hook('c')]))).toEqual(['a', 'b', 'c']);
    expect(compose([hook('a'), hook('b'), hook('c')], '/old')).toBe('/c:/b:/a:/old');
    expect(names(orderHooks([hook('c'), hook('b'), hook('a')]))).toEqual(['c', 'b', 'a']);
    // x's entries must come before y's, so x runs after y; z is free and declared before y, so it goes first.
    expect(names(orderHooks([hook('x', { precedes: ['y'] }), hook('z'), hook('y')]))).toEqual(['z', 'y', 'x']);
    expect(compose([hook('x', { precedes: ['y'] }), hook('z'), hook('y')], null)).toBe('/x:/y:/z');
    // Among hooks free to go next, the one declared first goes: b (free) before c (free), then a.
    expect(names(orderHooks([hook('a'), hook('b'), hook('c', { follows: ['a'] })]))).toEqual(['b', 'c', 'a']);
    // q waits for s; r, free and declared before s, does not.
    expect(names(orderHooks([hook('p'), hook('q'), hook('r'), hook('s', { follows: ['q'] })]))).toEqual(['p', 'r', 's', 'q']);
  });

  it('places prepended entries as precedes and follows say, whatever the declaration order', () => {
    for (const declared of permutations([driverHook(), hook('mine', { precedes: ['driver'] })]))
      expect(compose(declared, '$ORIGIN')).toBe(`/mine:${DRIVER}:$ORIGIN`);
    for (const declared of permutations([driverHook(), hook('mine', { follows: ['driver'] })]))
      expect(compose(declared, '$ORIGIN')).toBe(`${DRIVER}:/mine:$ORIGIN`);
    // Said from either side, the same constraint.
    expect(names(orderHooks([hook('late', { precedes: ['early'] }), hook('early')]))).toEqual(['early', 'late']);
    expect(names(orderHooks([hook('late'), hook('early', { follows: ['late'] })]))).toEqual(['early', 'late']);
    const chain = [hook('c', { precedes: ['b'] }), hook('b', { precedes: ['a'] }), hook('a')];
    for (const declared of permutations(chain)) {
      expect(names(orderHooks(declared))).toEqual(['a', 'b', 'c']);
      expect(compose(declared, null)).toBe('/c:/b:/a');
    }
    // Between cuda-compat and the driver: the compat entry stays first.
    expect(compose([driverHook(), cudaCompatHook(COMPAT), hook('mine', { follows: ['cuda-compat'], precedes: ['driver'] })], null)).toBe(
      `${COMPAT}/compat:/mine:${DRIVER}`,
    );
  });

  it('places appended entries as precedes and follows say: an appending hook that precedes another runs first', () => {
    const tail = (name: string, fields: Partial<Omit<Hook, 'name'>> = {}): Hook =>
      hook(name, { transform: { kind: 'append', dirs: [`/${name}`] }, ...fields });
    for (const declared of permutations([tail('a', { follows: ['b'] }), tail('b'), tail('c', { precedes: ['b'] })])) {
      expect(compose(declared, '/old')).toBe('/old:/c:/b:/a');
    }
    // A prepended entry comes before an appended one whatever the constraints say, or need not say.
    expect(compose([tail('t', { follows: ['driver'] }), driverHook()], '/old')).toBe(`${DRIVER}:/old:/t`);
    expect(compose([hook('p', { precedes: ['t'] }), tail('t')], '/old')).toBe('/p:/old:/t');
    const impossible = usageError(() => orderHooks([tail('t', { precedes: ['driver'] }), driverHook()]));
    expect(impossible.message).toBe(
      'hook "t" puts the entries of "t" before those of "driver", but "t" appends and "driver" prepends: appended entries always come after prepended ones',
    );
    expect(usageError(() => orderHooks([hook('p', { follows: ['t'] }), tail('t')])).message).toBe(
      'hook "p" puts the entries of "t" before those of "p", but "t" appends and "p" prepends: appended entries always come after prepended ones',
    );
  });

  it('rejects an unknown hook name as a usage error naming both hooks', () => {
    const inPrecedes = usageError(() => orderHooks([driverHook(), hook('mine', { precedes: ['drvier'] })]));
    expect(inPrecedes.message).toContain('"drvier"');
    expect(inPrecedes.message).toContain('"mine"');
    const inFollows = usageError(() => orderHooks([hook('mine', { follows: ['nope'] })]));
    expect(inFollows.message).toContain('"nope"');
    expect(inFollows.message).toContain('"mine"');
    const sameName = usageError(() => orderHooks([hook('a', { precedes: ['*'] }), hook('y', { follows: ['Driver'] }), driverHook()]));
    expect(sameName.message).toContain('"Driver"');
    // A built-in hook that is off (allowed absent): nothing to place against.
    expect(names(orderHooks([hook('mine', { precedes: ['driver'] })], new Set(['driver'])))).toEqual(['mine']);
  });

  it('rejects a cycle as a usage error naming the hooks in it', () => {
    const two = usageError(() => orderHooks([hook('free'), hook('a', { precedes: ['b'] }), hook('b', { precedes: ['a'] })]));
    expect(two.message).toMatch(/cycle/);
    expect(two.message).toContain('a');
    expect(two.message).toContain('b');
    expect(two.message).not.toContain('free');
    const self = usageError(() => orderHooks([hook('loop', { follows: ['loop'] })]));
    expect(self.message).toContain('loop');
    const three = usageError(() =>
      orderHooks([hook('x', { follows: ['y'] }), hook('y', { follows: ['z'] }), hook('z', { follows: ['x'] })]),
    );
    for (const name of ['x', 'y', 'z']) expect(three.message).toContain(name);
  });

  it('rejects a constraint on, or naming, a hook that adds no entries of its own', () => {
    const on = usageError(() => orderHooks([driverHook(), { ...removeStubsHook(), follows: ['driver'] }]));
    expect(on.message).toContain('remove-stubs');
    expect(on.message).toContain('driver');
    const drop = hook('drop', { transform: { kind: 'remove-matching', fragment: '/build/' } });
    const naming = usageError(() => orderHooks([drop, hook('mine', { precedes: ['drop'] })]));
    expect(naming.message).toBe(
      'hook "mine" precedes hook "drop", which adds no entries of its own to come before or after (hooks that remove entries run after every hook that adds them)',
    );
  });

  it('rejects two hooks with one name', () => {
    const twice = usageError(() => orderHooks([driverHook(), driverHook(b('/opt/driver'))]));
    expect(twice.message).toContain('"driver"');
  });

  it("puts a prepending hook with precedes: ['*'] first in the runpath, an appending one with follows: ['*'] last", () => {
    const first = hook('first', { precedes: ['*'] });
    for (const declared of permutations([first, hook('a'), hook('b', { precedes: ['a'] }), hook('c')])) {
      const ordered = names(orderHooks(declared));
      expect(ordered[ordered.length - 1]).toBe('first');
      expect(compose(declared, null)?.startsWith('/first:')).toBe(true);
    }
    // Two of them keep their declaration order, after everything else.
    expect(names(orderHooks([hook('z', { precedes: ['*'] }), hook('y', { precedes: ['*'] }), hook('m')]))).toEqual(['m', 'z', 'y']);
    const last = hook('last', { transform: { kind: 'append', dirs: ['/last'] }, follows: ['*'] });
    const other = hook('other', { transform: { kind: 'append', dirs: ['/other'] } });
    for (const declared of permutations([last, other, driverHook()])) expect(compose(declared, '/old')).toBe(`${DRIVER}:/old:/other:/last`);
  });

  it('runs the hooks that remove entries after every hook that adds them, and the stubs replacement last', () => {
    // remove-stubs drops a stubs entry that a hook declared after it adds.
    const late = hook('late-stubs', { transform: { kind: 'prepend', dirs: [STUBS] } });
    expect(compose([removeStubsHook(), driverHook(), late], '/opt/lib')).toBe(`${DRIVER}:/opt/lib`);
    const drop = hook('drop', { transform: { kind: 'remove-matching', fragment: '/late' } });
    const lateDir = hook('late', { transform: { kind: 'append', dirs: ['/late/lib'] } });
    expect(names(orderHooks([removeStubsHook(), drop, lateDir, driverHook()]))).toEqual(['late', 'driver', 'drop', 'remove-stubs']);
    expect(compose([drop, lateDir, driverHook()], '/late/x:/opt')).toBe(`${DRIVER}:/opt`);
  });
});

describe('composeRunpath', () => {
  const all = (): Hook[] => [driverHook(), cudaCompatHook(COMPAT), removeStubsHook()];

  it('by default drops duplicate and empty entries, first occurrence wins', () => {
    expect(compose(all(), `a::b:a:${DRIVER}:`)).toBe(`${COMPAT}/compat:${DRIVER}:a:b`);
    expect(compose([driverHook()], `:${DRIVER}::`)).toBe(DRIVER);
    expect(compose(all(), null)).toBe(`${COMPAT}/compat:${DRIVER}`);
    expect(compose(all(), '')).toBe(`${COMPAT}/compat:${DRIVER}`);
    // Applying the result again changes nothing.
    const once = compose(all(), `$ORIGIN:${STUBS}:$ORIGIN/../lib:$ORIGIN`);
    expect(once).toBe(`${COMPAT}/compat:${DRIVER}:$ORIGIN:$ORIGIN/../lib`);
    expect(compose(all(), once)).toBe(once);
    // Only the stubs hook, on a file without a runpath: nothing to add.
    expect(compose([removeStubsHook()], null)).toBe('');
  });

  it('with nixpkgs-compat, reproduces patchelf --set-rpath "<dir>:$old" hook by hook', () => {
    // An absent or empty runpath leaves the trailing ':' Nixpkgs writes.
    expect(compose([driverHook()], null, 'nixpkgs-compat')).toBe(`${DRIVER}:`);
    expect(compose([driverHook()], '', 'nixpkgs-compat')).toBe(`${DRIVER}:`);
    expect(compose([driverHook(), cudaCompatHook(COMPAT)], null, 'nixpkgs-compat')).toBe(`${COMPAT}/compat:${DRIVER}:`);
    // No dedupe, empty entries kept.
    expect(compose([driverHook(), cudaCompatHook(COMPAT)], `${DRIVER}:a::a`, 'nixpkgs-compat')).toBe(
      `${COMPAT}/compat:${DRIVER}:${DRIVER}:a::a`,
    );
    expect(compose([driverHook(), cudaCompatHook(COMPAT)], '$ORIGIN', 'nixpkgs-compat')).toBe(`${COMPAT}/compat:${DRIVER}:$ORIGIN`);
    // Applying twice prepends twice, as running the Nixpkgs hooks twice would.
    const once = compose([driverHook(), cudaCompatHook(COMPAT)], '$ORIGIN', 'nixpkgs-compat');
    expect(compose([driverHook(), cudaCompatHook(COMPAT)], once, 'nixpkgs-compat')).toBe(
      `${COMPAT}/compat:${DRIVER}:${COMPAT}/compat:${DRIVER}:$ORIGIN`,
    );
  });

  it('gives i386 files the -32 driver directory by default, and, as Nixpkgs (one link per derivation), not in nixpkgs-compat', () => {
    const i386 = file({ machine: EM.EM_386 });
    expect(compose([driverHook()], null, 'default', i386)).toBe('/run/opengl-driver-32/lib');
    expect(compose([driverHook()], null, 'nixpkgs-compat', i386)).toBe('/run/opengl-driver/lib:');
    expect(compose([driverHook(b('/opt/gl'))], '$ORIGIN', 'default', i386)).toBe('/opt/gl-32/lib:$ORIGIN');
    for (const machine of [EM.EM_X86_64, EM.EM_AARCH64]) {
      expect(compose([driverHook()], null, 'default', file({ machine }))).toBe(DRIVER);
      expect(compose([driverHook(b('/opt/gl'))], null, 'default', file({ machine }))).toBe('/opt/gl/lib');
    }
    // The compat hook has no 32-bit variant.
    expect(compose(all(), null, 'default', i386)).toBe(`${COMPAT}/compat:/run/opengl-driver-32/lib`);
  });

  it('never applies cuda-compat to files under its own directory', () => {
    for (const path of [`${COMPAT}/compat/libcuda.so.1`, `${COMPAT}/lib/libnvidia-ptxjitcompiler.so`, `${COMPAT}/compat/`]) {
      const composed = composeRunpath(orderHooks(all()), file({ path }), '$ORIGIN', 'default');
      expect(composed?.value, path).toBe(`${DRIVER}:$ORIGIN`);
      expect(composed?.applied, path).toEqual(['driver', 'remove-stubs']);
    }
    // Only cuda-compat, on its own file: no hook applies at all.
    expect(composeRunpath([cudaCompatHook(COMPAT)], file({ path: `${COMPAT}/compat/libcuda.so.1` }), null, 'default')).toBeNull();
    // A sibling whose name merely starts with the same characters is not under it.
    const sibling = composeRunpath(orderHooks(all()), file({ path: `${COMPAT}-dev/lib/libcuda.so` }), null, 'default');
    expect(sibling?.value).toBe(`${COMPAT}/compat:${DRIVER}`);
    // A relative spelling of the same directory is the same directory.
    const relative = composeRunpath(
      orderHooks([driverHook(), cudaCompatHook(b(`${COMPAT}/../${COMPAT.split('/').pop() ?? ''}`))]),
      file({ path: `${COMPAT}/compat/libcuda.so.1` }),
      null,
      'default',
    );
    expect(relative?.applied).toEqual(['driver']);
  });

  it('never applies cuda-compat to files under its own directory when its name is not ASCII', () => {
    // The command line's directory is text, its runpath entry the bytes of its UTF-8; the walk's paths are text.
    const compat = '/nix/store/00000000000000000000000000000000-cudé_compat';
    const hooks = [cudaCompatHook(hookDirectory(compat, '--cuda-compat', false))];
    expect(composeRunpath(hooks, file({ path: `${compat}/compat/libcuda.so.1` }), null, 'default')).toBeNull();
    expect(composeRunpath(hooks, file(), null, 'default')?.value).toBe(bytes(`${compat}/compat`));
  });

  it('records which hook put each entry there', () => {
    const composed = composeRunpath(orderHooks(all()), file(), `$ORIGIN:${DRIVER}:${STUBS}`, 'default');
    expect(composed?.entries).toEqual([
      { dir: `${COMPAT}/compat`, hook: 'cuda-compat' },
      { dir: DRIVER, hook: 'driver' },
      { dir: '$ORIGIN', hook: null },
    ]);
    const compat = composeRunpath(orderHooks([driverHook(), cudaCompatHook(COMPAT)]), file(), `$ORIGIN:${DRIVER}`, 'nixpkgs-compat');
    expect(compat?.entries).toEqual([
      { dir: `${COMPAT}/compat`, hook: 'cuda-compat' },
      { dir: DRIVER, hook: 'driver' },
      { dir: '$ORIGIN', hook: null },
      { dir: DRIVER, hook: null },
    ]);
    const empty = composeRunpath(orderHooks([driverHook()]), file(), null, 'nixpkgs-compat');
    expect(empty?.entries).toEqual([
      { dir: DRIVER, hook: 'driver' },
      { dir: '', hook: null },
    ]);
    // Appending and multi-directory hooks are traced too.
    const custom = composeRunpath(
      orderHooks([driverHook(), hook('tail', { transform: { kind: 'append', dirs: ['/opt/a', '/opt/b'] } })]),
      file(),
      '/opt/a',
      'default',
    );
    expect(custom?.entries).toEqual([
      { dir: DRIVER, hook: 'driver' },
      { dir: '/opt/a', hook: null },
      { dir: '/opt/b', hook: 'tail' },
    ]);
    for (const c of [composed, compat, empty, custom]) expect(c?.entries.map((e) => e.dir).join(':')).toBe(c?.value);
  });

  it('applies a hook only to the files its selector names', () => {
    const onlyLib = hook('origin', {
      transform: { kind: 'prepend', dirs: ['$ORIGIN/../lib'] },
      files: { include: ['lib/**'], exclude: ['lib/stubs/**'] },
    });
    const sharedOnly = hook('so', { transform: { kind: 'append', dirs: ['/so'] }, files: { sharedObjectsOnly: true } });
    const hooks = [driverHook(), onlyLib, sharedOnly];
    expect(compose(hooks, null, 'default', file({ relativePath: 'lib/libx.so' }))).toBe(`$ORIGIN/../lib:${DRIVER}:/so`);
    expect(compose(hooks, null, 'default', file({ relativePath: 'lib/deep/libx.so' }))).toBe(`$ORIGIN/../lib:${DRIVER}:/so`);
    expect(compose(hooks, null, 'default', file({ relativePath: 'lib/stubs/libcuda.so' }))).toBe(`${DRIVER}:/so`);
    expect(compose(hooks, null, 'default', file({ relativePath: 'bin/app', isSharedObject: false }))).toBe(DRIVER);
    expect(compose(hooks, null, 'default', file({ relativePath: 'libexec/lib/x.so' }))).toBe(`${DRIVER}:/so`);
  });
});

describe('composeAfterResolver', () => {
  const resolved = [
    { dir: '/nix/store/22222222222222222222222222222222-zlib/lib', hook: 'auto-patchelf' },
    { dir: '$ORIGIN/../lib', hook: null },
  ];

  it('the resolver first, then cuda-compat and driver prepend, whatever the order the hooks are given in', () => {
    const builtins = [driverHook(), cudaCompatHook(COMPAT), removeStubsHook()];
    for (const given of permutations(builtins)) {
      const composed = composeAfterResolver(orderHooks(given), file(), resolved, 'default');
      expect(composed.value).toBe(`${COMPAT}/compat:${DRIVER}:${resolved[0]?.dir}:$ORIGIN/../lib`);
      expect(composed.entries.map((entry) => entry.hook)).toEqual(['cuda-compat', 'driver', 'auto-patchelf', null]);
      expect(composed.applied[0]).toBe('auto-patchelf');
    }
  });

  it('nixpkgs-compat: each hook prepends to what the resolver wrote, as its patchelf --set-rpath after autoPatchelf', () => {
    const composed = composeAfterResolver(orderHooks([driverHook()]), file(), resolved.slice(0, 1), 'nixpkgs-compat', 2);
    expect(composed.value).toBe(`${DRIVER}:${DRIVER}:${resolved[0]?.dir}`);
  });

  it('with no other hook for the file, the resolver alone', () => {
    const composed = composeAfterResolver([], file(), resolved, 'default');
    expect(composed).toEqual({ value: `${resolved[0]?.dir}:$ORIGIN/../lib`, entries: resolved, applied: ['auto-patchelf'] });
  });
});
