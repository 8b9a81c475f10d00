// doctor's advice works: for each finding that prints a fix, the fix is run as printed (a command line
// as it is, an instruction as a user would carry it out), then doctor again, and the finding is gone.
//   - a stub libcuda in a stubs directory Nixpkgs' patterns match: apply --remove-stubs;
//   - a stub libcuda in a stubs directory they do not match: apply --remove-stubs --stubs-pattern, the
//     entry itself (--remove-stubs alone changes nothing there);
//   - a stub libcuda through a wrapper's LD_LIBRARY_PATH: taken out of the wrapper (no runpath advice:
//     LD_LIBRARY_PATH comes before every runpath);
//   - a runpath entry ahead of a library's own $ORIGIN holding another copy of its sibling: set-runpath;
//   - a library not found: its directory added to the runpath (add-runpath).

import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FileReport } from '../src/doctor/doctor-report.js';
import { cudaOutput } from './helpers/doctor-cuda-tree.js';
import { doctorJson } from './helpers/doctor-run.js';
import { buildLibrary, buildProgram } from './helpers/doctor-trees.js';
import { execTool } from './helpers/exec.js';
import { assertCliBuilt, cliPath, runCli } from './helpers/run-cli.js';
import { makeShellWrapper } from './helpers/shell-wrapper.js';
import { makeTempDir } from './helpers/temp-dir.js';

let t = '';

beforeAll(async () => {
  assertCliBuilt();
  t = await makeTempDir('doctor-advice');
}, 60_000);

afterAll(async () => {
  if (t !== '') await rm(t, { recursive: true, force: true });
});

interface Advised {
  readonly report: FileReport;
  readonly fix: string;
}

/** doctor on `path`: the report of `file` (default: the one file), and the fix of its finding `code`. */
async function advised(path: string, code: string, file?: string): Promise<Advised> {
  const { json } = await doctorJson([path]);
  const report = file === undefined ? json.files[0] : json.files.find((f) => f.file === file);
  if (report === undefined) throw new Error(`no report for ${file ?? path}`);
  const finding = report.findings.find((f) => f.code === code);
  expect(finding, JSON.stringify(report.findings)).toBeDefined();
  expect(finding?.fix).not.toBeNull();
  return { report, fix: finding?.fix ?? '' };
}

/** The `cuda-patchelf …` command a fix prints, run as printed (words as the shell splits them), with the built CLI. */
async function runPrintedCommand(fix: string): Promise<void> {
  const command = /cuda-patchelf (.*)$/.exec(fix)?.[1];
  if (command === undefined) throw new Error(`no command in the fix: ${fix}`);
  const run = await execTool('bash', ['-c', `node ${cliPath} ${command}`]);
  expect(run.code, `${command}\n${run.stderr}`).toBe(0);
}

async function codesOf(path: string, file?: string): Promise<string[]> {
  const { json } = await doctorJson([path]);
  const report = file === undefined ? json.files[0] : json.files.find((f) => f.file === file);
  return report?.findings.map((f) => f.code) ?? [];
}

describe('a stub libcuda', () => {
  it.each([
    ['in a stubs directory Nixpkgs’ patterns match', 'nix-stubs', 'aaaa-cuda_cudart/lib/stubs', false],
    ['in a stubs directory of another name', 'custom-stubs', 'opt/cuda-11.8/lib64/stubs', true],
    // The command names the file, and the pattern the entry, as the text their bytes spell.
    ['in directories whose names are not ASCII', 'stubs-é', 'opt/cudé-11.8/lib64/stubs', true],
  ])('%s: the printed command takes it out of the runpath', async (_, rootName, stubsDir, needsPattern) => {
    const root = join(t, rootName);
    const stubs = join(root, stubsDir);
    await buildLibrary(join(stubs, 'libcuda.so.1'), 'libcuda.so.1');
    const out = await cudaOutput(join(root, 'out'));
    const set = await runCli(['set-runpath', stubs, out.cudart]);
    expect(set.code, set.stderr).toBe(0);
    const { fix } = await advised(out.probe, 'libcuda-stub');
    expect(fix.includes('--stubs-pattern')).toBe(needsPattern);
    await runPrintedCommand(fix);
    expect(await codesOf(out.probe)).not.toContain('libcuda-stub');
  });

  it('through a wrapper’s LD_LIBRARY_PATH: the fix says so (no runpath can help), and taking it out of the wrapper works', async () => {
    const root = join(t, 'wrapped');
    const stubs = join(root, 'stubs');
    await buildLibrary(join(stubs, 'libcuda.so.1'), 'libcuda.so.1');
    const out = await cudaOutput(join(root, 'out'));
    const wrapper = join(root, 'out', 'bin', 'probe-wrapper');
    await makeShellWrapper(wrapper, out.probe, [{ prefix: stubs }]);
    const { fix } = await advised(wrapper, 'libcuda-stub');
    expect(fix).toContain('LD_LIBRARY_PATH');
    expect(fix).not.toMatch(/runpath of|apply/);
    // Carried out: the wrapper written again without the stubs directory.
    await makeShellWrapper(wrapper, out.probe, []);
    expect(await codesOf(wrapper)).not.toContain('libcuda-stub');
  });
});

describe('shadowing', () => {
  it.each([
    ['', 'shadow'],
    // The command names the file, and the runpath's entries, as the text their bytes spell.
    [', in directories whose names are not ASCII', 'shadow-é'],
  ])(
    "an entry ahead of a library's own $ORIGIN that holds another copy of its sibling: the printed set-runpath fixes it%s",
    async (_, rootName) => {
      const root = join(t, rootName);
      const system = join(root, 'system');
      // Another build of the same name: another hash table makes another file.
      await buildLibrary(join(system, 'libsib.so'), 'libsib.so', { extra: ['-Wl,--hash-style=sysv'] });
      const lib = join(root, 'pkg', 'lib');
      const sibling = await buildLibrary(join(lib, 'libsib.so'), 'libsib.so');
      const main = await buildLibrary(join(lib, 'libmain.so'), 'libmain.so', { needs: [sibling], runpath: `${system}:$ORIGIN` });
      const { fix, report } = await advised(main, 'runpath-shadows-own');
      expect(report.findings.find((f) => f.code === 'runpath-shadows-own')?.severity).toBe('error');
      expect(fix).toContain(`cuda-patchelf set-runpath '$ORIGIN:${system}' ${main}`);
      await runPrintedCommand(fix);
      expect(await codesOf(main)).not.toContain('runpath-shadows-own');
    },
  );
});

describe('a library not found', () => {
  it('its directory added to the runpath of the file that needs it, as the fix says', async () => {
    const root = join(t, 'missing');
    const elsewhere = await buildLibrary(join(root, 'elsewhere', 'libgone.so'), 'libgone.so');
    await mkdir(join(root, 'bin'), { recursive: true });
    const program = await buildProgram(join(root, 'bin', 'prog'), { needs: [elsewhere] });
    const { fix } = await advised(program, 'library-missing');
    expect(fix).toBe(`add the directory that holds libgone.so to the runpath of ${program}`);
    const added = await runCli(['add-runpath', join(root, 'elsewhere'), program]);
    expect(added.code, added.stderr).toBe(0);
    expect(await codesOf(program)).not.toContain('library-missing');
  });
});
