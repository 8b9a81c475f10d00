// `print --json` agrees with patchelf's --print-rpath/--print-needed/--print-soname/--print-interpreter on
// every fixture patchelf can read; where patchelf refuses a query, print must report the matching absence.
// The patchelf-compatible mode answers the same four queries with patchelf's very output and exit status.

import { beforeAll, describe, expect, it } from 'vitest';
import { readelfText } from './helpers/readelf.js';
import { fixtures, requireTool } from './helpers/fixtures.js';
import { assertCliBuilt, runCli, runCliInProcess } from './helpers/run-cli.js';
import { execTool, type ExecResult } from './helpers/exec.js';
import { mapLimited } from './helpers/map-limited.js';

interface PrintRecord {
  file: string;
  interpreter: string | null;
  soname: string | null;
  needed: string[];
  rpath: string | null;
  runpath: string | null;
  spareDynamicSlots: number | null;
}

interface PatchelfAnswers {
  rpath: ExecResult;
  needed: ExecResult;
  soname: ExecResult;
  interpreter: ExecResult;
}

/** patchelf 0.14 needs section headers; a file without them is one it cannot read at all. */
const NO_SECTION_HEADERS = /no section headers/;
const NO_DYNAMIC = /cannot find section '\.dynamic'/;
const NO_INTERP = /cannot find section '\.interp'/;

/** patchelf ends each answer with a newline; --print-soname on a file without one prints nothing. */
const answer = (result: ExecResult): string => result.stdout.replace(/\n$/, '');

const all = fixtures();
let records = new Map<string, PrintRecord>();
const answers = new Map<string, PatchelfAnswers>();

beforeAll(async () => {
  requireTool('patchelf');
  requireTool('readelf');
  assertCliBuilt();
  const printed = await runCli(['print', '--json', ...all.map((f) => f.path)], { timeoutMs: 60_000 });
  expect(printed.stderr).toBe('');
  expect(printed.code).toBe(0);
  records = new Map((JSON.parse(printed.stdout) as PrintRecord[]).map((r) => [r.file, r]));
  // patchelf reads each file whole into memory: two at a time keeps the CUDA libraries affordable.
  await mapLimited(all, 2, async (fixture) => {
    const ask = (option: string): Promise<ExecResult> => execTool('patchelf', [option, fixture.path]);
    answers.set(fixture.path, {
      rpath: await ask('--print-rpath'),
      needed: await ask('--print-needed'),
      soname: await ask('--print-soname'),
      interpreter: await ask('--print-interpreter'),
    });
  });
});

/** For a file patchelf cannot read: this query was refused for that reason, not answered wrongly. */
function expectRefused(result: ExecResult): void {
  expect(result.code).not.toBe(0);
  expect(result.stderr).toMatch(NO_SECTION_HEADERS);
}

function readable(path: string): boolean {
  const a = answers.get(path);
  if (a === undefined) throw new Error(`patchelf was not run on ${path}`);
  return !Object.values(a).some((r) => r.code !== 0 && NO_SECTION_HEADERS.test(r.stderr));
}

describe('patchelf agrees with print --json', () => {
  it('patchelf reads enough fixtures of every class and byte order to compare', () => {
    const compared = all.filter((f) => readable(f.path));
    // Fixtures without section headers are the only ones patchelf 0.14 may refuse.
    expect(compared.length).toBeGreaterThanOrEqual(Math.max(5, Math.ceil(all.length * 0.8)));
    const kinds = new Set(compared.map((f) => `${String(f.elfClass)}/${String(f.endian)}`));
    expect(kinds.size, [...kinds].join(', ')).toBeGreaterThanOrEqual(3);
    expect(new Set(compared.map((f) => f.arch))).toEqual(new Set(all.map((f) => f.arch)));
  });

  describe.each(all.map((f) => ({ id: f.id, path: f.path })))('$id', ({ path }) => {
    const get = (): { r: PrintRecord; a: PatchelfAnswers } => {
      const r = records.get(path);
      const a = answers.get(path);
      if (r === undefined || a === undefined) throw new Error(`missing print record or patchelf answers for ${path}`);
      return { r, a };
    };

    it('patchelf refuses the file only when it has no section headers', async () => {
      const header = await readelfText(['-h'], path);
      const count = /Number of section headers:\s+(\d+)/.exec(header)?.[1];
      expect(count).toBeDefined();
      expect(readable(path)).toBe(Number(count) > 0);
    });

    it('--print-rpath: DT_RUNPATH, else DT_RPATH', () => {
      const { r, a } = get();
      if (!readable(path)) return expectRefused(a.rpath);
      if (a.rpath.code === 0) {
        expect(r.runpath ?? r.rpath ?? '').toBe(answer(a.rpath));
      } else {
        expect(a.rpath.stderr).toMatch(NO_DYNAMIC);
        expect({ spare: r.spareDynamicSlots, rpath: r.rpath, runpath: r.runpath }).toEqual({ spare: null, rpath: null, runpath: null });
      }
    });

    it('--print-needed', () => {
      const { r, a } = get();
      if (!readable(path)) return expectRefused(a.needed);
      if (a.needed.code === 0) {
        expect(r.needed).toEqual(answer(a.needed) === '' ? [] : answer(a.needed).split('\n'));
      } else {
        expect(a.needed.stderr).toMatch(NO_DYNAMIC);
        expect({ spare: r.spareDynamicSlots, needed: r.needed }).toEqual({ spare: null, needed: [] });
      }
    });

    it('--print-soname', () => {
      const { r, a } = get();
      if (!readable(path)) return expectRefused(a.soname);
      expect(a.soname.code, a.soname.stderr).toBe(0);
      expect(r.soname).toBe(answer(a.soname) === '' ? null : answer(a.soname));
    });

    it('--print-interpreter', () => {
      const { r, a } = get();
      if (!readable(path)) return expectRefused(a.interpreter);
      if (a.interpreter.code === 0) {
        expect(r.interpreter).toBe(answer(a.interpreter));
      } else {
        expect(a.interpreter.stderr).toMatch(NO_INTERP);
        expect(r.interpreter).toBeNull();
      }
    });
  });
});

describe('the patchelf-compatible mode answers as patchelf', () => {
  const queries = ['--print-rpath', '--print-needed', '--print-soname', '--print-interpreter'] as const;
  const key = {
    '--print-rpath': 'rpath',
    '--print-needed': 'needed',
    '--print-soname': 'soname',
    '--print-interpreter': 'interpreter',
  } as const;

  it.each(all.map((f) => ({ id: f.id, path: f.path })))('$id: the same output and exit status', async ({ path }) => {
    if (!readable(path)) return;
    const a = answers.get(path);
    if (a === undefined) throw new Error(`patchelf was not run on ${path}`);
    for (const query of queries) {
      const theirs = a[key[query]];
      // In this process: the four queries on every fixture would take minutes as processes.
      const ours = await runCliInProcess([query, path]);
      expect({ query, code: ours.code, stdout: ours.stdout }, ours.stderr).toEqual({ query, code: theirs.code, stdout: theirs.stdout });
      expect(ours.stderr === '', ours.stderr).toBe(theirs.stderr === '');
    }
  });
});
