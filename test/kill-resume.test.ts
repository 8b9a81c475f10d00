// A run killed between the writes of one file leaves a prefix of its plan (kill campaign); the next run
// must finish the job: the file as tools read it (readelf: section headers, the .dynstr section) says
// what the loader sees, and a replaced /nix/store path no longer occurs anywhere in the file (Nix would
// keep it alive). For each prefix of each plan: apply the prefix, run the same edit again, check.
// An in-place edit switches the dynamic array in place and then zeroes the string it replaced, with
// no section header to go stale in between: killed there, run again, it must come out byte for byte
// as an uninterrupted run, and a later apply (another edit) must zero the dead string too.

import { closeSync, openSync } from 'node:fs';
import { copyFile, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ByteString } from '../src/elf/byte-string.js';
import { editElfFile } from '../src/edit/edit-file.js';
import { writeAtOffsets } from '../src/write/write-at-offsets.js';
import { fixture } from './helpers/fixtures.js';
import { planFile } from './helpers/fuzz-plan-file.js';
import { effectiveRunpath, readDynamic } from './helpers/readelf.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';
import { bytes } from './helpers/byte-strings.js';

/** Store path hashes: 32 characters of Nix's base32 alphabet. */
const OLD_HASH = '1b9p07z77phvv2hf6gm9f28syp39f1ag';
const OLD = `/nix/store/${OLD_HASH}-cuda-old/lib`;
const NEW = '/nix/store/00000000000000000000000000000000-cuda_compat/compat:/run/opengl-driver/lib';

interface Case {
  readonly fixture: string;
  /** Set first with a complete edit: the value the resumed edit replaces. */
  readonly before: string | null;
}

const CASES: readonly Case[] = [
  // The file the kill campaign caught: killed after the dynamic array switched, before the section headers.
  { fixture: 'debian/x86_64/libtinfo6/libtic.so.6.4', before: null },
  { fixture: 'compiled/x86_64/libuser-runpath', before: OLD },
  { fixture: 'compiled/aarch64-64k/libuser-runpath', before: OLD },
  { fixture: 'cuda/x86_64/libnvtoolsext1/libnvToolsExt.so.1.0.0', before: OLD },
];

const scratch = useTempDir('kill-resume');
beforeAll(assertCliBuilt);

const setNew = (editor: { setRunpath(value: ByteString, policy: 'keep'): void }): void => editor.setRunpath(bytes(NEW), 'keep');

describe('a run killed inside a file, then run again', () => {
  it.each(CASES)('$fixture: every prefix of the plan, run again, reads as an uninterrupted run', async ({ fixture: id, before }) => {
    const base = join(scratch(), `${id.replaceAll('/', '_')}.base`);
    await copyFile(fixture(id).path, base);
    if (before !== null) await editElfFile(base, (editor) => editor.setRunpath(bytes(before), 'keep'));
    const plan = await planFile(base, setNew);
    expect(plan.writes.length).toBeGreaterThan(1);
    const problems: string[] = [];
    for (let k = 1; k < plan.writes.length; k++) {
      const path = join(scratch(), `${id.replaceAll('/', '_')}.${k}`);
      await copyFile(base, path);
      const fd = openSync(path, 'r+');
      try {
        await writeAtOffsets(fd, plan, { limit: k });
      } finally {
        closeSync(fd);
      }
      await editElfFile(path, setNew);
      const facts = await readDynamic(path);
      const runpath = facts === null ? null : effectiveRunpath(facts);
      const where = `killed after write ${k} of ${plan.writes.length} (${plan.writes[k - 1]?.what ?? ''}), then run again`;
      if (runpath !== NEW) problems.push(`${where}: readelf reads the runpath as ${String(runpath)}`);
      if (before !== null && (await readFile(path)).includes(OLD_HASH)) problems.push(`${where}: the replaced ${OLD} is still in the file`);
    }
    expect(problems).toEqual([]);
  });
});

/** Long enough that OLD, set after it, takes its place in place and leaves zeroed slack behind it. */
const FILLER = `/opt/${'f'.repeat(200)}/lib`;
/** Longer than OLD (it cannot take OLD's own bytes), shorter than the slack FILLER leaves: it goes there. */
const NEW_IN_SLACK = '/nix/store/11111111111111111111111111111111-cuda-new-and-longer/lib';

interface InPlaceCase {
  readonly label: string;
  readonly edit: (editor: { setRunpath(value: string | null, policy: 'keep'): void }) => void;
}

const IN_PLACE_EDITS: readonly InPlaceCase[] = [
  { label: 'remove-runpath', edit: (editor) => editor.setRunpath(null, 'keep') },
  { label: 'set-runpath into zeroed slack', edit: (editor) => editor.setRunpath(bytes(NEW_IN_SLACK), 'keep') },
];

const IN_PLACE_FIXTURES = ['compiled/x86_64/libuser-runpath', 'compiled/aarch64-64k/libuser-runpath'];

describe.each(IN_PLACE_FIXTURES)('%s: an in-place edit killed between its switch and its cleanup', (id) => {
  /** The file with runpath OLD, set in place over FILLER: zeroed slack follows it. */
  async function baseFile(label: string): Promise<string> {
    const base = join(scratch(), `${id.replaceAll('/', '_')}.${label.replaceAll(' ', '-')}.base`);
    await copyFile(fixture(id).path, base);
    await editElfFile(base, (editor) => editor.setRunpath(bytes(FILLER), 'keep'));
    await editElfFile(base, (editor) => editor.setRunpath(bytes(OLD), 'keep'));
    return base;
  }

  /** A copy of `base` with the first `count` writes of `plan` applied. */
  async function killedAfter(base: string, plan: Awaited<ReturnType<typeof planFile>>, count: number, name: string): Promise<string> {
    const path = join(scratch(), name);
    await copyFile(base, path);
    const fd = openSync(path, 'r+');
    try {
      writeAtOffsets(fd, plan, { limit: count });
    } finally {
      closeSync(fd);
    }
    return path;
  }

  it.each(IN_PLACE_EDITS)('$label: every prefix, run again, is byte for byte an uninterrupted run', async ({ label, edit }) => {
    const base = await baseFile(label);
    const plan = await planFile(base, edit);
    expect(plan.tier).toBe('in-place');
    // The moment this is about: the dynamic array switched, the replaced string not yet zeroed.
    const switched = plan.writes.findIndex((write) => write.phase === 'dynamic') + 1;
    expect(switched).toBeGreaterThan(0);
    expect(plan.writes.slice(switched).some((write) => write.phase === 'cleanup')).toBe(true);
    const uninterrupted = await killedAfter(
      base,
      plan,
      plan.writes.length,
      `${id.replaceAll('/', '_')}.${label.replaceAll(' ', '-')}.whole`,
    );
    const expected = await readFile(uninterrupted);
    expect(expected.includes(OLD_HASH)).toBe(false);
    const problems: string[] = [];
    for (let k = 1; k < plan.writes.length; k++) {
      const path = await killedAfter(base, plan, k, `${id.replaceAll('/', '_')}.${label.replaceAll(' ', '-')}.${k}`);
      if (k === switched) expect((await readFile(path)).includes(OLD_HASH), 'the kill leaves the replaced string').toBe(true);
      await editElfFile(path, edit);
      const where = `killed after write ${k} of ${plan.writes.length} (${plan.writes[k - 1]?.what ?? ''}), then run again`;
      const bytes = await readFile(path);
      if (bytes.includes(OLD_HASH)) problems.push(`${where}: the replaced ${OLD} is still in the file`);
      if (Buffer.compare(bytes, expected) !== 0) problems.push(`${where}: not the bytes of an uninterrupted run`);
    }
    expect(problems).toEqual([]);
  });

  it.each(IN_PLACE_EDITS)('$label: a later apply zeroes the string the kill left', async ({ label, edit }) => {
    const base = await baseFile(`${label} apply`);
    const plan = await planFile(base, edit);
    const switched = plan.writes.findIndex((write) => write.phase === 'dynamic') + 1;
    const tree = join(scratch(), `${id.replaceAll('/', '_')}.${label.replaceAll(' ', '-')}.tree`);
    await mkdir(tree);
    const killed = await killedAfter(base, plan, switched, `${id.replaceAll('/', '_')}.${label.replaceAll(' ', '-')}.tree/lib.so`);
    expect((await readFile(killed)).includes(OLD_HASH)).toBe(true);
    const result = await runCli(['apply', tree]);
    expect(result.code, result.stderr).toBe(0);
    expect((await readFile(killed)).includes(OLD_HASH)).toBe(false);
    const facts = await readDynamic(killed);
    expect(facts === null ? null : effectiveRunpath(facts)).toMatch(/^\/run\/opengl-driver\/lib/);
  });
});
