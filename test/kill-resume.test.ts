// A run killed between the writes of one file leaves a prefix of its plan (kill campaign); the next run
// must finish the job: the file as tools read it (readelf: section headers, the .dynstr section) says
// what the loader sees, and a replaced /nix/store path no longer occurs anywhere in the file (Nix would
// keep it alive). For each prefix of each plan: apply the prefix, run the same edit again, check.

import { closeSync, openSync } from 'node:fs';
import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { editElfFile } from '../src/edit/edit-file.js';
import { applyPlan } from '../src/write/apply-plan.js';
import { fixture } from './helpers/fixtures.js';
import { planFile } from './helpers/fuzz-plan-file.js';
import { effectiveRunpath, readDynamic } from './helpers/readelf-dynamic.js';

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

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), 'cuda-patchelf-kill-resume-'));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

const setNew = (editor: { setRunpath(value: string, policy: 'keep'): void }): void => editor.setRunpath(NEW, 'keep');

describe('a run killed inside a file, then run again', () => {
  it.each(CASES)('$fixture: every prefix of the plan, run again, reads as an uninterrupted run', async ({ fixture: id, before }) => {
    const base = join(scratch, `${id.replaceAll('/', '_')}.base`);
    await copyFile(fixture(id).path, base);
    if (before !== null) await editElfFile(base, (editor) => editor.setRunpath(before, 'keep'));
    const plan = await planFile(base, setNew);
    expect(plan.writes.length).toBeGreaterThan(1);
    const problems: string[] = [];
    for (let k = 1; k < plan.writes.length; k++) {
      const path = join(scratch, `${id.replaceAll('/', '_')}.${k}`);
      await copyFile(base, path);
      const fd = openSync(path, 'r+');
      try {
        await applyPlan(fd, plan, { limit: k });
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
