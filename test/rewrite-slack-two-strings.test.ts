// Two new strings in one edit, both placed in the zeroed slack an earlier edit left in .dynstr: each
// keeps its own terminator. They once shared one, the first read as both joined, and the edit was
// refused as not reading back.

import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { fixture } from './helpers/fixtures.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { makeTempDir } from './helpers/temp-dir.js';
import { readDynamic } from './helpers/readelf.js';

beforeAll(() => {
  assertCliBuilt();
});

it('set-rpath and add-needed together, into the slack of an earlier runpath: both strings read back', async () => {
  const file = join(await makeTempDir('slack-two'), 'libuser.so');
  await copyFile(fixture('compiled/x86_64/libuser-runpath').path, file);
  for (const args of [
    ['add-runpath', '/x', file],
    ['remove-runpath', '--all', file],
    ['--set-rpath', '/y', '--add-needed', 'liba.so', file],
  ]) {
    const result = await runCli(args);
    expect({ args, code: result.code, stderr: result.stderr }).toEqual({ args, code: 0, stderr: '' });
  }
  const dynamic = await readDynamic(file);
  expect(dynamic?.runpath).toBe('/y');
  expect(dynamic?.needed).toContain('liba.so');
});
