// When the hooks of hooks/ cannot do their job the build fails, as a Nix build must, with cuda-patchelf's
// own message and a line that says which step failed; the postFixupHooks after them never run.

import { access, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildWithHooks, runpathOf, usePackages, type Build } from './helpers/shim-stdenv.js';

const packages = usePackages();

/** Registers a postFixupHooks entry after the others; it leaves a marker file when it runs. */
async function laterHook(dir: string): Promise<{ hook: string; marker: string }> {
  const hook = join(dir, 'later-hook.sh');
  const marker = join(dir, 'later-hook-ran');
  await writeFile(hook, `postFixupHooks+=('touch ${marker}')\n`);
  return { hook, marker };
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

function expectFailed(build: Build, code: number, ...messages: readonly string[]): void {
  expect(build.result.code, `${build.result.stderr}${build.result.stdout}`).toBe(code);
  for (const message of messages) expect(build.result.stderr).toContain(message);
}

describe('failures', () => {
  it("fails the build with cuda-patchelf's exit code and its message for the file it could not patch", async () => {
    const scratch = await buildWithHooks(packages(), { hooks: [] });
    const { hook, marker } = await laterHook(scratch.dir);
    // A truncated ELF file in the lib output: the magic and the start of a header, nothing behind them.
    const build = await buildWithHooks(packages(), {
      hooks: ['driver', hook],
      attrs: { preFixup: 'head -c 100 "$out/bin/greet" > "$lib/lib/libtruncated.so"' },
    });
    expectFailed(
      build,
      3,
      `cuda-patchelf: ${build.lib}/lib/libtruncated.so: `,
      'cuda-patchelf hook: error: cuda-patchelf apply failed with exit code 3 (its messages are above)',
    );
    expect(await exists(marker)).toBe(false);
    // cuda-patchelf still did the files it could, as it does outside a build.
    expect(await runpathOf(build.libgreet)).toBe(`${packages().driverEntry}:${packages().stubsDir}`);
  });

  it('fails the build when no cuda-patchelf can be found, before touching any file', async () => {
    const build = await buildWithHooks(packages(), { hooks: ['driver'], cli: 'none' });
    expectFailed(build, 127, 'cuda-patchelf hook: error: cuda-patchelf is not on PATH: add it to nativeBuildInputs or set CUDA_PATCHELF');
    expect(await runpathOf(build.libgreet)).toBe(packages().stubsDir);
  });

  it('fails the build when CUDA_PATCHELF names nothing that runs', async () => {
    const build = await buildWithHooks(packages(), {
      hooks: ['driver'],
      cli: 'none',
      attrs: { CUDA_PATCHELF: '/nonexistent/cuda-patchelf' },
    });
    expectFailed(build, 127, '/nonexistent/cuda-patchelf: No such file or directory', 'cuda-patchelf apply failed with exit code 127');
    expect(await runpathOf(build.libgreet)).toBe(packages().stubsDir);
  });

  it('fails the build when the cuda-compat hook has no cuda_compat directory, unless it is switched off', async () => {
    const missing = await buildWithHooks(packages(), { hooks: ['driver', 'compat'], envPaths: false });
    expectFailed(missing, 1, 'cuda-patchelf hook: error: the cuda-compat hook has no cuda_compat directory');
    expect(missing.calls).toEqual([]);
    const off = await buildWithHooks(packages(), {
      hooks: ['driver', 'compat'],
      envPaths: false,
      attrs: { dontUseAutoAddCudaCompatRunpath: '1' },
    });
    expect(off.result.code).toBe(0);
    expect(await runpathOf(off.libgreet)).toBe(`/run/opengl-driver/lib:${packages().stubsDir}`);
  });
});
