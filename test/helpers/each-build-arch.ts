// The frame of the tests that build a tree for each build architecture and run what they patch in it:
// the tools and the built CLI are checked first; then, per architecture, a describe block whose tests
// share what `setUp` made once, in a directory of its own under one temporary directory, removed after.

import { join } from 'node:path';
import { beforeAll, describe } from 'vitest';
import { BUILD_ARCHES, type BuildArch } from './arch.js';
import { requireTool } from './fixtures.js';
import { assertCliBuilt } from './run-cli.js';
import { useTempDir } from './use-temp-dir.js';

/**
 * `tests` registers the tests of one architecture; `setup` is filled with what `setUp` returned before
 * the first of them runs (the same object throughout, so that the tests can hold it from the start).
 */
export function describeEachBuildArch<Setup extends object>(
  label: string,
  tools: readonly string[],
  setUp: (arch: BuildArch, dir: string) => Promise<Setup>,
  tests: (setup: Setup, arch: BuildArch) => void,
): void {
  const work = useTempDir(label);
  beforeAll(() => {
    for (const tool of tools) requireTool(tool);
    assertCliBuilt();
  });
  describe.each(BUILD_ARCHES)('%s', (arch) => {
    const setup = {} as Setup;
    beforeAll(async () => {
      Object.assign(setup, await setUp(arch, join(work(), arch)));
    }, 120_000);
    tests(setup, arch);
  });
}
