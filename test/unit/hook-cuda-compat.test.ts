// cuda_compat in a built tree, without a disk: the drop-cuda-compat hook (which entries are
// cuda_compat's, and where it runs among the hooks), and which entries a run puts behind the driver's
// directory (entriesPutBehindDriver: the pure half of the warning apply gives when that demotes
// cuda_compat).

import { describe, expect, it } from 'vitest';
import { EM } from '../../src/elf/constants.js';
import {
  CUDA_COMPAT_PATTERNS,
  cudaCompatHook,
  driverHook,
  dropCudaCompatHook,
  removeStubsHook,
} from '../../src/hook-engine/builtin-hooks.js';
import type { Semantics } from '../../src/hook-engine/compose-hooks.js';
import { driverDirectories, entriesPutBehindDriver } from '../../src/hook-engine/driver-precedence.js';
import type { FileFacts, Hook } from '../../src/hook-engine/hook.js';
import { orderHooks } from '../../src/hook-engine/order-hooks.js';
import { b, composeRunpath, isOneHookRun } from './helpers/hooks-as-text.js';
import { permutations } from './helpers/permutations.js';

const COMPAT = '/nix/store/00000000000000000000000000000000-cuda12.8-cuda_compat-12.8.40136012/compat';
const DRIVER = '/run/opengl-driver/lib';
const STUBS = '/nix/store/11111111111111111111111111111111-cuda12.8-cuda_cudart-12.8.90/lib/stubs';
const FILE: FileFacts = { relativePath: 'lib/libx.so', path: '/build/out/lib/libx.so', isSharedObject: true, machine: EM.EM_X86_64 };

const compose = (hooks: readonly Hook[], current: string | null, semantics: Semantics = 'default'): ReturnType<typeof composeRunpath> =>
  composeRunpath(orderHooks(hooks), FILE, current, semantics);

describe('drop-cuda-compat', () => {
  it("removes cuda_compat's compat directories, of Nixpkgs' package and of NVIDIA's, in any spelling", () => {
    expect(CUDA_COMPAT_PATTERNS).toEqual(['*cuda_compat*/compat', '*cuda-compat*/compat', '*/cuda*/compat']);
    const compat = [
      COMPAT,
      '/nix/store/00000000000000000000000000000000-cuda_compat-12.2.34086590/compat',
      '/nix/store/00000000000000000000000000000000-cuda_compat/compat/',
      '/nix//store/00000000000000000000000000000000-cuda_compat/./compat',
      '/usr/local/cuda/compat',
      '/usr/local/cuda-12.8/compat',
      '/opt/cuda-compat-12-8/compat',
    ];
    const kept = [
      DRIVER,
      '$ORIGIN',
      '$ORIGIN/../compat',
      STUBS,
      '/opt/compat',
      '/usr/local/cuda/lib64',
      '/nix/store/22222222222222222222222222222222-cudnn-9/lib',
      `${COMPAT}/more`,
    ];
    for (const dir of compat) expect(compose([dropCudaCompatHook()], `${dir}:/a`)?.value, dir).toBe('/a');
    expect(compose([dropCudaCompatHook()], kept.join(':'))?.value).toBe(kept.join(':'));
  });

  it("takes out what cuda-compat put first, and the driver's directory leads, whatever the declaration order", () => {
    const patched = `${COMPAT}:${DRIVER}:$ORIGIN`;
    for (const declared of permutations([dropCudaCompatHook(), driverHook(), removeStubsHook()])) {
      const composed = compose(declared, `${patched}:${STUBS}`);
      expect(composed?.value).toBe(`${DRIVER}:$ORIGIN`);
      expect(composed?.applied.at(-1)).toBe('remove-stubs');
    }
    expect(compose([dropCudaCompatHook()], patched)?.value).toBe(`${DRIVER}:$ORIGIN`);
    // Nothing left to take out: the same runpath again.
    expect(compose([driverHook(), dropCudaCompatHook()], `${DRIVER}:$ORIGIN`)?.value).toBe(`${DRIVER}:$ORIGIN`);
    // In nixpkgs-compat, the driver hook's run is one more prepend; the drop leaves the rest as it is.
    expect(compose([driverHook(), dropCudaCompatHook()], `${COMPAT}:${DRIVER}:`, 'nixpkgs-compat')?.value).toBe(`${DRIVER}:${DRIVER}:`);
    expect(isOneHookRun(orderHooks([driverHook(), dropCudaCompatHook()]), FILE, `${DRIVER}:${COMPAT}:$ORIGIN`)).toBe(false);
    expect(isOneHookRun(orderHooks([driverHook(), dropCudaCompatHook()]), FILE, `${DRIVER}:$ORIGIN`)).toBe(true);
  });

  it('is a removal: a constraint cannot name it', () => {
    expect(() => orderHooks([dropCudaCompatHook(), { ...driverHook(), precedes: ['drop-cuda-compat'] }])).toThrow(
      /adds no entries of its own/,
    );
  });
});

describe('entriesPutBehindDriver', () => {
  const driverOnly = orderHooks([driverHook()]);
  const dirs = driverDirectories(driverOnly);
  const behind = (
    old: string | null,
    hooks: readonly Hook[] = driverOnly,
    semantics: Semantics = 'default',
  ): ReturnType<typeof entriesPutBehindDriver> =>
    entriesPutBehindDriver(
      old === null ? null : b(old),
      composeRunpath(orderHooks(hooks), FILE, old, semantics)?.entries ?? [],
      driverDirectories(hooks),
    );

  it("knows every spelling of the driver's directory the hooks add: per machine, and the stubs replacement's", () => {
    expect([...dirs]).toEqual([DRIVER, '/run/opengl-driver-32/lib']);
    expect([...driverDirectories([removeStubsHook({ driverLink: b('/opt/gl') })])]).toEqual(['/opt/gl/lib', '/opt/gl-32/lib']);
    expect([...driverDirectories([cudaCompatHook(b('/c')), dropCudaCompatHook()])]).toEqual([]);
  });

  it('finds cuda_compat put behind the driver by a driver-only run over a tree patched with it, in both semantics', () => {
    expect(behind(`${COMPAT}:${DRIVER}:$ORIGIN`)).toEqual({ driver: DRIVER, behind: [COMPAT] });
    expect(behind(`${COMPAT}:${DRIVER}:`, driverOnly, 'nixpkgs-compat')).toEqual({ driver: DRIVER, behind: [COMPAT] });
    // A file that had no driver entry at all: every absolute entry it had now comes after the driver's.
    expect(behind(`/opt/a:$ORIGIN:${COMPAT}/`)).toEqual({ driver: DRIVER, behind: ['/opt/a', COMPAT] });
  });

  it('finds nothing where the order of the file stays: compat kept first, the driver already ahead, or no driver entry', () => {
    expect(behind(`${COMPAT}:${DRIVER}`, [driverHook(), cudaCompatHook(b(COMPAT.slice(0, -'/compat'.length)))])).toBeNull();
    expect(behind(`${DRIVER}:${COMPAT}`)).toBeNull();
    expect(behind(`${COMPAT}:${DRIVER}`, [dropCudaCompatHook(), driverHook()])).toBeNull();
    expect(behind(`${COMPAT}:${STUBS}`, [removeStubsHook()])).toBeNull();
    expect(behind('$ORIGIN:lib')).toBeNull();
    // Stubs belong behind the driver (some stub directories hold a libcuda.so.1 too).
    expect(
      behind(`${STUBS}:/opt/stubs:/nix/store/33333333333333333333333333333333-cuda12.8-libcublas-12.8.4.1-stubs/lib:${COMPAT}`),
    ).toEqual({ driver: DRIVER, behind: [COMPAT] });
    expect(entriesPutBehindDriver(b(COMPAT), [{ dir: b(COMPAT), hook: null }], dirs)).toBeNull();
  });
});
