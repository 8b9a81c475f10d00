// set-interpreter cut short anywhere: every state a kill can leave a program in (the original with
// each prefix of the plan's writes, and with the next write cut at each page boundary inside it, as
// the kernel cuts a write for a fatal signal; the kill campaign's own list) must run, through the old
// loader or the new one; and the same edit run again must finish the job: the new path, read by
// readelf, the .interp section header in step, the old path gone from the file, and nothing left to
// do. A path appended together with a grown string table shares one region: one data write. Then a
// slice of the kill campaign for set-interpreter (npm run kill-campaign -- --edit set-interpreter):
// the command SIGKILLed at random moments over copies of the compiled programs of both architectures.

import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { editElfFile } from '../src/edit/edit-file.js';
import type { DynamicEditor } from '../src/plan/dynamic-editor.js';
import { runInterpreterKillCampaign } from './campaign/interpreter-kill-campaign.js';
import { killStateList } from './campaign/kill-campaign.js';
import type { BuildArch } from './helpers/arch.js';
import { fixture, programVars, runOn, sysroot } from './helpers/fixtures.js';
import { planFile } from './helpers/fuzz-plan-file.js';
import { readelfText } from './helpers/readelf.js';
import { copyFixture } from './helpers/verify.js';
import { assertCliBuilt, cliPath } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';
import { bytes } from './helpers/byte-strings.js';

const PROGRAMS: readonly string[] = [
  'compiled/x86_64/pie-runpath',
  'compiled/x86_64/exec-runpath',
  'compiled/x86_64/pie-runpath-lld',
  'compiled/x86_64/pie-runpath-gold',
  'compiled/aarch64-64k/pie-runpath',
  'compiled/aarch64-64k/exec-runpath',
];

const LOADER: Record<BuildArch, { readonly name: string; readonly old: string }> = {
  x86_64: { name: 'ld-linux-x86-64.so.2', old: '/lib64/ld-linux-x86-64.so.2' },
  aarch64: { name: 'ld-linux-aarch64.so.1', old: '/lib/ld-linux-aarch64.so.1' },
};

/** Long enough that no program has room for it in place, and that a new string goes to a grown table. */
const RUNPATH = `$ORIGIN/../lib:/nix/store/00000000000000000000000000000000-cuda_compat/compat:/run/opengl-driver/lib`;

const scratch = useTempDir('kill-interpreter');
let loaderDir: string;

beforeAll(async () => {
  assertCliBuilt();
  loaderDir = join(scratch(), 'a', 'long', 'enough', 'directory', 'for', 'the', 'new', 'loader');
  await mkdir(loaderDir, { recursive: true });
  await copyFile('/lib64/ld-linux-x86-64.so.2', join(loaderDir, LOADER.x86_64.name));
  await copyFile(join(sysroot('aarch64'), 'lib', LOADER.aarch64.name), join(loaderDir, LOADER.aarch64.name));
});

interface Edit {
  readonly label: string;
  readonly apply: (path: string) => (editor: DynamicEditor) => void;
}

const EDITS: readonly Edit[] = [
  { label: 'a longer interpreter path', apply: (path) => (editor) => editor.setInterpreter(bytes(path)) },
  {
    label: 'a longer interpreter path and a longer runpath',
    apply: (path) => (editor) => {
      editor.setInterpreter(bytes(path));
      editor.setRunpath(bytes(RUNPATH), 'keep');
    },
  },
];

const CASES = PROGRAMS.flatMap((id) => EDITS.map((edit) => ({ id, edit })));

describe('set-interpreter killed at every write', () => {
  it.each(CASES)('$id, $edit.label: every state runs, and the edit run again finishes it', async ({ id, edit }) => {
    const f = fixture(id);
    const arch = f.arch as BuildArch;
    const loader = join(loaderDir, LOADER[arch].name);
    const operations = edit.apply(loader);
    const base = await copyFixture(f, join(scratch(), id.replaceAll('/', '_')));
    const original = new Uint8Array(await readFile(base.file));
    const plan = await planFile(base.file, operations);
    expect(plan.tier).toBe('append');
    // One region: the path (and the grown table) in one data write at the end of the file.
    expect(plan.writes.filter((write) => write.phase === 'data' && write.offset >= original.length)).toHaveLength(1);
    const run = async (): Promise<string> => {
      const result = await runOn(arch, base.file, [], programVars(f.libraryPath));
      return result.code === 0 ? result.stdout.trim() : `exit ${String(result.code ?? result.signal)}: ${result.stderr.trim()}`;
    };
    expect(await run()).toBe(f.expectedOutput);

    await editElfFile(base.file, operations);
    const uninterrupted = await readFile(base.file);
    const problems: string[] = [];
    for (const { bytes, what: state } of killStateList(original, plan)) {
      if (state === 'original') continue;
      await writeFile(base.file, bytes);
      const output = await run();
      if (output !== f.expectedOutput) problems.push(`${state}: the program does not run (${output})`);
      await editElfFile(base.file, operations);
      const after = await readFile(base.file);
      const where = `${state}, then run again`;
      if (state === 'complete' && !after.equals(uninterrupted)) problems.push(`${where}: not the bytes of an uninterrupted run`);
      const headers = await readelfText(['-l', '-S'], base.file);
      if (!headers.includes(`[Requesting program interpreter: ${loader}]`)) problems.push(`${where}: readelf does not read the new path`);
      if (!interpSectionInStep(headers)) problems.push(`${where}: the .interp section header is not PT_INTERP's`);
      if (after.includes(LOADER[arch].old)) problems.push(`${where}: the old path ${LOADER[arch].old} is still in the file`);
      if ((await run()) !== f.expectedOutput) problems.push(`${where}: the program does not run`);
      if ((await planFile(base.file, operations)).tier !== 'noop') problems.push(`${where}: the edit a third time is not a noop`);
    }
    expect(problems).toEqual([]);
  });
});

/** Whether readelf -lS shows the .interp section at PT_INTERP's offset, address and size. */
function interpSectionInStep(headers: string): boolean {
  const segment = /INTERP\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)/.exec(headers);
  const section = /\.interp\s+PROGBITS\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)/.exec(headers);
  if (segment === null || section === null) return false;
  const [offset, vaddr, size] = segment.slice(1).map((hex) => Number.parseInt(hex, 16));
  const [addr, sectionOffset, sectionSize] = section.slice(1).map((hex) => Number.parseInt(hex, 16));
  return offset === sectionOffset && vaddr === addr && size === sectionSize;
}

describe('set-interpreter killed at random moments', () => {
  it('leaves every program original, edited or a prefix that runs, and a second run finishes the job', async () => {
    const { figures, problems } = await runInterpreterKillCampaign({
      kills: 4,
      seed: 0x1e,
      scratch: join(scratch(), 'campaign'),
      cli: cliPath,
      copies: 1,
      runSample: 2,
      durableEvery: 2,
    });
    expect(problems.map((p) => `round ${p.round} (killed at ${p.delayMs} ms): ${p.problem}`)).toEqual([]);
    expect(figures.kills).toBe(4);
    expect(figures.programs).toBeGreaterThanOrEqual(20);
    expect(figures.broken).toBe(0);
    expect(figures.unfinished).toBe(0);
    expect(figures.secondRunFailures).toBe(0);
  }, 240_000);
});
