// docs/design.md's ELF facts, the Nix trap: Nix keeps a store path alive as long as its hash occurs anywhere in the output,
// so a runpath or needed name that an edit replaces or removes must not survive anywhere in the file (old
// .dynstr copy included). And the opposite trap (patchelf's shared-rpath test): GNU ld lets one string be
// the tail of another, so clearing or overwriting a dead string must stop where a live one begins.

import { copyFile, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { type BuildArch, BUILD_ARCHES } from './helpers/arch.js';
import { programVars, requireTool, runOn } from './helpers/fixtures.js';
import { compile, describeRun, occurrences } from './helpers/rw-build.js';
import { dynamicStrings, parseSymbols, readelfText } from './helpers/readelf.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';

/** Store path hashes: 32 characters of Nix's base32 alphabet (no e, o, u, t). */
const OLD_HASH = '1b9p07z77phvv2hf6gm9f28syp39f1ag';
const NEW_HASH = 'q8wx3kcl5mdr0jv2sn4hya6gz9b1fpi7';
const NEEDED_HASH = 'zk2n4c7w0j8p5v9h3m6d1s7g2b4f8rx5';
const OLD = `/nix/store/${OLD_HASH}-cuda-old/lib`;
/** Same length as OLD: fits exactly where OLD was. */
const SAME_LENGTH = `/nix/store/${NEW_HASH}-cuda-new/lib`;
const LONGER = `/nix/store/${NEW_HASH}-cuda_compat-12.2/compat:/run/opengl-driver/lib:/nix/store/${NEW_HASH}-cudart-12.2/lib`;
const NEEDED_PATH = `/nix/store/${NEEDED_HASH}-dep-1.0/lib/libdep.so`;
/** In values set along the way and replaced by a later step. */
const MID_HASH = 'a3r7m1l9c5y0w2n8k4j6h0g2f4d6s8q1';

const work = useTempDir('rw-dead-strings');

beforeAll(async () => {
  assertCliBuilt();
  for (const tool of ['readelf', 'gcc', 'aarch64-linux-gnu-gcc', 'qemu-aarch64']) requireTool(tool);
});

async function cliOk(args: readonly string[]): Promise<string> {
  const result = await runCli([...args, '--json'], { timeoutMs: 60_000 });
  expect(result.code, `cuda-patchelf ${args.join(' ')}\n${result.stderr}`).toBe(0);
  return (JSON.parse(result.stdout) as { tier: string }[])[0]?.tier ?? 'none';
}

async function count(file: string, text: string): Promise<number> {
  return occurrences(new Uint8Array(await readFile(file)), Buffer.from(text)).length;
}

/** Neither the path nor its hash (what Nix's scanner looks for) is left anywhere in the file. */
async function expectGone(file: string, path: string, hash: string): Promise<void> {
  expect(await count(file, path), `${path} still in ${file}`).toBe(0);
  expect(await count(file, hash), `${hash} still in ${file}`).toBe(0);
}

async function runsWith(arch: BuildArch, file: string, libraryPath: string, expected: string): Promise<void> {
  const result = await runOn(arch, file, [], programVars(libraryPath, { LD_BIND_NOW: '1' }));
  expect(result.code, describeRun(result)).toBe(0);
  expect(result.stdout).toBe(expected);
}

describe.each(BUILD_ARCHES)('%s', (arch) => {
  let deps = '';
  let program = '';
  let rpathProgram = '';
  let library = '';
  let needing = '';
  let counter = 0;

  beforeAll(async () => {
    const d = join(work(), arch);
    deps = join(d, 'deps');
    await mkdir(deps, { recursive: true });
    // This dependency's soname is a store path, so that a program linked against it names it in DT_NEEDED.
    // It versions its symbol, so the store path is also the file name of a version need (vn_file).
    await compile(
      arch,
      deps,
      'libdep.so',
      { 'dep.c': 'const char *dep(void) { return "dep says hi"; }\n', 'dep.map': 'DEP_1.0 { global: dep; local: *; };\n' },
      ['-shared', '-fPIC', `-Wl,-soname,${NEEDED_PATH}`, '-Wl,--version-script=dep.map'],
    );
    await compile(arch, deps, 'libplain.so', { 'plain.c': 'const char *plain(void) { return "plain says hi"; }\n' }, [
      '-shared',
      '-fPIC',
      '-Wl,-soname,libplain.so',
    ]);
    const plainMain = { 'prog.c': '#include <stdio.h>\nconst char *plain(void);\nint main(void) { puts(plain()); return 0; }\n' };
    program = await compile(arch, d, 'prog', plainMain, ['-Ldeps', '-lplain', `-Wl,-rpath,${OLD}`]);
    rpathProgram = await compile(arch, d, 'prog-rpath', plainMain, ['-Ldeps', '-lplain', `-Wl,-rpath,${OLD}`, '-Wl,--disable-new-dtags']);
    library = await compile(arch, d, 'libuser.so', { 'user.c': 'const char *plain(void);\nconst char *user(void) { return plain(); }\n' }, [
      '-shared',
      '-fPIC',
      '-Ldeps',
      '-lplain',
      `-Wl,-rpath,${OLD}`,
    ]);
    needing = await compile(
      arch,
      d,
      'needing',
      { 'needing.c': '#include <stdio.h>\nconst char *dep(void);\nint main(void) { puts(dep()); return 0; }\n' },
      ['-Ldeps', '-ldep', `-Wl,-rpath,${OLD}`],
    );
    for (const file of [program, library, needing]) {
      expect(await dynamicStrings(file, 'RUNPATH')).toEqual([OLD]);
      expect(await count(file, OLD_HASH)).toBe(1);
    }
    expect(await dynamicStrings(rpathProgram, 'RPATH')).toEqual([OLD]);
    expect(await dynamicStrings(needing, 'NEEDED')).toContain(NEEDED_PATH);
    expect(await count(needing, NEEDED_HASH)).toBe(1);
    expect(await readelfText(['-V'], needing)).toContain(`File: ${NEEDED_PATH}`);
    await copyFile(join(deps, 'libdep.so'), join(deps, 'libdep-renamed.so'));
  });

  async function copyOf(file: string): Promise<string> {
    const copy = join(work(), arch, `${++counter}-${file.split('/').pop() ?? 'file'}`);
    await copyFile(file, copy);
    return copy;
  }

  describe.each([
    { name: 'program', get: (): string => program, runs: true },
    { name: 'program with DT_RPATH', get: (): string => rpathProgram, runs: true },
    { name: 'library', get: (): string => library, runs: false },
  ])('$name', ({ get, runs }) => {
    it.each([
      { name: 'shrinking in place', steps: [['set-runpath', '/opt/short/lib']], tiers: ['in-place'] },
      { name: 'same length in place', steps: [['set-runpath', SAME_LENGTH]], tiers: ['in-place'] },
      { name: 'growing (append)', steps: [['set-runpath', LONGER]], tiers: ['append'] },
      {
        name: 'shrinking, then growing into the bytes freed before',
        steps: [
          ['set-runpath', '/a'],
          ['set-runpath', '/opt/longer/than/a/lib'],
        ],
        tiers: ['in-place', 'in-place'],
      },
      {
        name: 'growing twice (the appended table grows again)',
        steps: [
          ['set-runpath', `${LONGER}:/nix/store/${MID_HASH}-mid/lib`],
          ['set-runpath', `${LONGER}:/and/some/more/entries/to/grow/it/again/and/again`],
        ],
        // The second step may use room the first left in the appended table.
        tiers: ['append', 'any'],
      },
      { name: 'remove-runpath --all', steps: [['remove-runpath', '--all']], tiers: ['in-place'] },
      { name: 'remove-runpath of that directory', steps: [['remove-runpath', OLD]], tiers: ['in-place'] },
      {
        name: 'add-runpath then remove the old directory',
        steps: [
          ['add-runpath', '/run/opengl-driver/lib'],
          ['remove-runpath', OLD],
        ],
        tiers: ['append', 'in-place'],
      },
      { name: 'DT_RPATH by --force-rpath, shrinking', steps: [['set-runpath', '--force-rpath', '/opt/short/lib']], tiers: ['in-place'] },
      { name: 'patchelf mode --set-rpath, growing', steps: [['--set-rpath', LONGER]], tiers: [] },
      {
        name: 'patchelf mode --force-rpath --set-rpath, shrinking',
        steps: [['--force-rpath', '--set-rpath', '/opt/short/lib']],
        tiers: [],
      },
      { name: 'patchelf mode --remove-rpath', steps: [['--remove-rpath']], tiers: [] },
    ])('$name', async ({ steps, tiers }) => {
      const file = await copyOf(get());
      const seen: string[] = [];
      for (const step of steps) {
        if (step[0]?.startsWith('--')) {
          const result = await runCli([...step, file], { timeoutMs: 60_000 });
          expect(result.code, result.stderr).toBe(0);
        } else {
          seen.push(await cliOk([...step, file]));
        }
      }
      expect(seen.map((tier, i) => (tiers[i] === 'any' ? 'any' : tier))).toEqual(tiers);
      await expectGone(file, OLD, OLD_HASH);
      const readelf = await readelfText(['-d'], file);
      expect(readelf).not.toContain(OLD_HASH);
      // Values set along the way and replaced since are dead too.
      expect(await count(file, MID_HASH)).toBe(0);
      if (runs) await runsWith(arch, file, deps, 'plain says hi\n');
    });
  });

  it('replace-needed: the old store path of a DT_NEEDED is gone, in the version needs too', async () => {
    const file = await copyOf(needing);
    expect(await cliOk(['replace-needed', NEEDED_PATH, 'libdep-renamed.so', file])).toBe('in-place');
    await expectGone(file, NEEDED_PATH, NEEDED_HASH);
    expect(await dynamicStrings(file, 'NEEDED')).toContain('libdep-renamed.so');
    expect(await readelfText(['-V'], file)).toContain('File: libdep-renamed.so ');
    expect(await dynamicStrings(file, 'RUNPATH')).toEqual([OLD]);
    await runsWith(arch, file, deps, 'dep says hi\n');
  });

  it('replace-needed with a longer name (append): the old store path is gone from the old table copy', async () => {
    const file = await copyOf(needing);
    const longer = `libdep-renamed-with-a-much-longer-name-than-before-so-it-cannot-fit-${'x'.repeat(40)}.so`;
    await copyFile(join(deps, 'libdep.so'), join(deps, longer));
    expect(await cliOk(['replace-needed', NEEDED_PATH, longer, file])).toBe('append');
    await expectGone(file, NEEDED_PATH, NEEDED_HASH);
    expect(await dynamicStrings(file, 'NEEDED')).toContain(longer);
    await runsWith(arch, file, deps, 'dep says hi\n');
  });

  describe('a string shared as the tail of another (GNU ld tail-merges .dynstr)', () => {
    let dir = '';
    let needTail = '';
    let symbolTail = '';

    beforeAll(async () => {
      dir = join(work(), arch, 'shared-tail');
      await mkdir(dir, { recursive: true });
      await compile(arch, dir, 'libbar.so', { 'bar.c': 'int bar(void) { return 7; }\n' }, ['-shared', '-fPIC', '-Wl,-soname,libbar.so']);
      await copyFile(join(dir, 'libbar.so'), join(dir, 'libbaz.so'));
      const source = '#include <stdio.h>\nint bar(void);\nint main(void) { printf("bar=%d\\n", bar()); return 0; }\n';
      // "libbar.so" (DT_NEEDED) is the tail of the runpath "/foo/libbar.so"; "bar" (a symbol) the tail of "/opt/use_bar".
      needTail = await compile(arch, dir, 'need-tail', { 'prog.c': source }, ['-L.', '-lbar', '-Wl,-rpath,/foo/libbar.so']);
      symbolTail = await compile(arch, dir, 'symbol-tail', { 'prog.c': source }, ['-L.', '-lbar', '-Wl,-rpath,/opt/use_bar']);
      const strings = async (file: string): Promise<string[]> =>
        (await readelfText(['-p', '.dynstr'], file))
          .split('\n')
          .map((line) => /^\s*\[\s*[0-9a-f]+\]\s+(.*)$/.exec(line)?.[1] ?? '')
          .filter((s) => s !== '');
      // The layout the test is about: no separate copy of the shorter string.
      expect(await strings(needTail)).toContain('/foo/libbar.so');
      expect(await strings(needTail)).not.toContain('libbar.so');
      expect(await strings(symbolTail)).toContain('/opt/use_bar');
      expect(await strings(symbolTail)).not.toContain('bar');
    });

    async function shared(file: string): Promise<string> {
      const copy = join(dir, `${++counter}-${file.split('/').pop() ?? 'file'}`);
      await copyFile(file, copy);
      return copy;
    }

    it.each([
      { name: 'set-runpath shorter (in place)', args: ['set-runpath', '/x'], runpath: '/x' },
      { name: 'set-runpath longer (append)', args: ['set-runpath', LONGER], runpath: LONGER },
      { name: 'remove-runpath --all', args: ['remove-runpath', '--all'], runpath: null },
    ])('DT_NEEDED tail: $name', async ({ args, runpath }) => {
      const file = await shared(needTail);
      await cliOk([...args, file]);
      expect(await dynamicStrings(file, 'NEEDED')).toEqual(['libbar.so', 'libc.so.6']);
      expect(await dynamicStrings(file, 'RUNPATH')).toEqual(runpath === null ? [] : [runpath]);
      // What only the runpath used is gone; the shared tail stays.
      expect(await count(file, '/foo/libbar.so')).toBe(0);
      expect(await count(file, 'libbar.so\0')).toBeGreaterThanOrEqual(1);
      await runsWith(arch, file, dir, 'bar=7\n');
    });

    it('replace-needed of the tail keeps the runpath that contains it', async () => {
      const file = await shared(needTail);
      await cliOk(['replace-needed', 'libbar.so', 'libbaz.so', file]);
      expect(await dynamicStrings(file, 'NEEDED')).toEqual(['libbaz.so', 'libc.so.6']);
      expect(await dynamicStrings(file, 'RUNPATH')).toEqual(['/foo/libbar.so']);
      await runsWith(arch, file, dir, 'bar=7\n');
    });

    it.each([
      { name: 'set-runpath shorter (in place)', args: ['set-runpath', '/y'] },
      { name: 'set-runpath longer (append)', args: ['set-runpath', LONGER] },
      { name: 'remove-runpath --all', args: ['remove-runpath', '--all'] },
    ])('symbol name tail: $name', async ({ args }) => {
      const file = await shared(symbolTail);
      const symbols = await readelfText(['--dyn-syms'], file);
      await cliOk([...args, file]);
      const after = await readelfText(['--dyn-syms'], file);
      expect(parseSymbols(after).map((symbol) => symbol.name)).toContain('bar');
      expect(after).toBe(symbols);
      expect(await count(file, '/opt/use_bar')).toBe(0);
      await runsWith(arch, file, dir, 'bar=7\n');
    });
  });
});
