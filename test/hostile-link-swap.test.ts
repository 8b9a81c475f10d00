// A file that another process swaps for a symbolic link after the walk listed it: apply must not
// follow the link out of the tree. The swap is made by the CLI's own process (a module loaded with
// node --import, in every thread) at the moment apply opens the file, so every run sees it.

import { copyFile, lstat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { fixture } from './helpers/fixtures.js';
import { assertCliBuilt, cliPath } from './helpers/run-cli.js';
import { parseReport } from './helpers/tree-report.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { sha256File } from './helpers/tree-tools.js';
import { execTool, mustExec } from './helpers/exec.js';

/** Module text: the first open of each listed path replaces it by a link to its target, then opens. */
function swapHookModule(swaps: Record<string, string>): string {
  return [
    "import fs from 'node:fs';",
    "import { syncBuiltinESMExports } from 'node:module';",
    `const swaps = new Map(Object.entries(${JSON.stringify(swaps)}));`,
    'const { openSync, unlinkSync, symlinkSync } = fs;',
    'fs.openSync = (...args) => {',
    "  const target = typeof args[0] === 'string' ? swaps.get(args[0]) : undefined;",
    '  if (target !== undefined) { swaps.delete(args[0]); unlinkSync(args[0]); symlinkSync(target, args[0]); }',
    '  return openSync(...args);',
    '};',
    'syncBuiltinESMExports();',
  ].join('\n');
}

beforeAll(() => {
  assertCliBuilt();
});

describe('a file swapped for a symbolic link after the walk', () => {
  it.each([1, 2])('is refused as changed, and the file the link points to is left alone (--jobs %i)', async (jobs) => {
    const work = await makeTempDir('link-swap');
    const library = fixture('compiled/x86_64/libuser-runpath').path;
    const tree = join(work, 'tree');
    const outside = join(work, 'outside.so');
    await mustExec('mkdir', ['-p', tree]);
    await copyFile(library, outside);
    const swapped = join(tree, 'swapped.so');
    const kept = join(tree, 'kept.so');
    await copyFile(library, swapped);
    await copyFile(library, kept);
    const hook = join(work, 'swap-hook.mjs');
    await writeFile(hook, swapHookModule({ [swapped]: outside }));
    const outsideBefore = await sha256File(outside);

    const result = await execTool(
      process.execPath,
      ['--import', pathToFileURL(hook).href, cliPath, 'apply', tree, '--json', '--jobs', String(jobs), '--threads-from-start'],
      { env: process.env },
    );
    const report = parseReport(result.stdout);
    expect((await lstat(swapped)).isSymbolicLink()).toBe(true);
    expect(report.files.find((f) => f.path === swapped)).toMatchObject({
      status: 'failed',
      error: { kind: 'changed', message: 'is a symbolic link now, not the regular file the walk listed; left alone' },
    });
    expect(report.files.find((f) => f.path === kept)).toMatchObject({ status: 'patched' });
    expect(await sha256File(outside)).toBe(outsideBefore);
    expect(result.code).toBe(3);
  });
});
