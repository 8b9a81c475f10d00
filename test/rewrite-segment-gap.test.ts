// Where the appended segment starts in memory: the largest st_size among the dynamic symbols above
// every segment's end (src/plan/segment-choice.ts), so that no symbol's extent, and no relocation
// against a symbol (r_offset + st_size: a copy relocation writes that much), reaches into it.
// eu-elflint checks exactly that, and flags a relocation that reaches a read-only segment. A library
// with a 3 MiB table read through the GOT reaches 3 MiB past its GOT slot: its new segment must start
// further up than that; a library of small symbols gets a gap of a page, not megabytes. Both are
// compiled here, for x86_64 and aarch64, and put through the whole verification ladder
// (test/helpers/verify.ts: readelf, patchelf, eu-elflint --gnu-ld before and after, ld.so, dlopen).

import { copyFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { machinePageSizeOf, BUILD_ARCHES } from './helpers/arch.js';
import { requireTool } from './helpers/fixtures.js';
import { programHeaders, parseSymbols, readelfText } from './helpers/readelf.js';
import { compile } from './helpers/rw-build.js';
import { cliEditOne, verifyPatched } from './helpers/verify.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const OLD_RUNPATH = '/opt/cuda-patchelf-gap-test/lib';
/** Longer than the slack of these small tables: the table is copied into a new segment. */
const NEW_RUNPATH = `/nix/store/${'g'.repeat(32)}-cuda-patchelf-segment-gap-test-with-a-long-enough-runpath/lib`;

const TABLE_SIZE = 3 * 2 ** 20;
const LIBRARIES = {
  // An exported table, read through its GOT slot (R_*_GLOB_DAT against a 3 MiB symbol).
  'a 3 MiB table': `const unsigned char big_table[${TABLE_SIZE}] = { 1, 2, 3 };\nint big_at(int i) { return big_table[i]; }\n`,
  'small symbols only': 'int small_value = 7;\nint small_get(void) { return small_value; }\n',
} as const;

const work = useTempDir('segment-gap');

beforeAll(async () => {
  for (const tool of ['readelf', 'eu-elflint', 'gcc', 'aarch64-linux-gnu-gcc', 'qemu-aarch64']) requireTool(tool);
});

/** The largest st_size in .dynsym, as readelf --dyn-syms lists it. */
async function largestDynamicSymbol(file: string): Promise<number> {
  return parseSymbols(await readelfText(['--dyn-syms'], file)).reduce((largest, symbol) => Math.max(largest, symbol.size), 0);
}

describe.each(BUILD_ARCHES)('%s: the appended segment starts the largest dynamic symbol size above the others', (arch) => {
  it.each(Object.entries(LIBRARIES))('%s', async (label, source) => {
    const dir = join(work(), `${arch}-${label.replaceAll(' ', '-')}`);
    await mkdir(dir, { recursive: true });
    const original = await compile(arch, dir, 'libgap.so', { 'gap.c': source }, [
      '-shared',
      '-fPIC',
      '-O1',
      `-Wl,--enable-new-dtags,-rpath,${OLD_RUNPATH}`,
    ]);
    const patched = join(dir, 'libgap-patched.so');
    await copyFile(original, patched);
    const record = await cliEditOne(['set-runpath', NEW_RUNPATH], patched);
    expect(record.tier).toBe('append');
    // eu-elflint --gnu-ld among the rest: no complaint the original did not have.
    await verifyPatched({
      original,
      patched,
      arch,
      expect: { runpath: NEW_RUNPATH },
      load: { kind: 'list', libraryPath: dir },
      again: ['set-runpath', NEW_RUNPATH],
      gone: [OLD_RUNPATH],
    });

    const largest = await largestDynamicSymbol(original);
    const page = machinePageSizeOf(arch);
    if (label === 'a 3 MiB table') expect(largest).toBe(TABLE_SIZE);
    else expect(largest).toBeLessThan(64);
    const before = (await programHeaders(original)).filter((row) => row.type === 'LOAD');
    const after = (await programHeaders(patched)).filter((row) => row.type === 'LOAD');
    const added = after.filter((row) => !before.some((old) => old.offset === row.offset && old.vaddr === row.vaddr));
    expect(added).toHaveLength(1);
    const highestEnd = Math.max(...before.map((row) => row.vaddr + row.memsz));
    // Far enough that no symbol reaches it, and no further than the page that takes that bound.
    expect(added[0]?.vaddr).toBeGreaterThanOrEqual(highestEnd + largest);
    expect(added[0]?.vaddr).toBeLessThan(highestEnd + largest + 2 * page);
  });
});
