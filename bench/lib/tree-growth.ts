// How much each file of a patched tree grew, against what the growth should be made of: the tables
// an edit copies to the end of the file (.dynstr; the dynamic array, the program header table and
// the sections next to it when they had to move). Anything beyond that is padding.

import { lstat, readdir } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { FileByteSource } from '../../src/elf/byte-source.js';
import { PT, SHT } from '../../src/elf/constants.js';
import { readElfImage } from '../../src/elf/elf-image.js';
import { readSectionHeaders } from '../../src/elf/section-headers.js';

/** The slack the benchmark target allows per file on top of the copied tables. */
export const GROWTH_SLACK_BYTES = 64;

export interface FileGrowth {
  readonly relativePath: string;
  readonly growth: number;
  /** Bytes past the old end of file that hold a structure (see copiedTables). */
  readonly copiedTables: number;
}

export interface GrowthReport {
  readonly filesGrown: number;
  readonly totalGrowth: number;
  readonly largestGrowth: number;
  /** growth − copied tables, largest first; only files above the slack. */
  readonly overSlack: readonly FileGrowth[];
  readonly largestExcess: number;
}

async function* regularFiles(dir: string): AsyncGenerator<string> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* regularFiles(path);
    else if (entry.isFile()) yield path;
  }
}

/** Bytes of [from, to) covered by the ranges (which may overlap). */
function covered(ranges: readonly (readonly [number, number])[], from: number, to: number): number {
  const clipped = ranges.map(([start, end]) => [Math.max(start, from), Math.min(end, to)] as const).filter(([start, end]) => end > start);
  clipped.sort((a, b) => a[0] - b[0]);
  let total = 0;
  let reached = from;
  for (const [start, end] of clipped) {
    if (end <= reached) continue;
    total += end - Math.max(start, reached);
    reached = end;
  }
  return total;
}

/**
 * The copied tables of a patched file: the bytes past `oldSize` that hold a structure (a section, the
 * program or section header table, the dynamic, interpreter or note segment); the rest is padding.
 */
async function copiedTables(path: string, oldSize: number): Promise<number> {
  const source = FileByteSource.open(path);
  try {
    const image = await readElfImage(source);
    const { header, programHeaders } = image;
    const ranges: [number, number][] = [[header.e_phoff, header.e_phoff + header.phnum * header.e_phentsize]];
    for (const ph of programHeaders) {
      if (ph.p_type === PT.PT_DYNAMIC || ph.p_type === PT.PT_INTERP || ph.p_type === PT.PT_NOTE)
        ranges.push([ph.p_offset, ph.p_offset + ph.p_filesz]);
    }
    const sections = await readSectionHeaders(image);
    if (sections.length > 0) ranges.push([header.e_shoff, header.e_shoff + sections.length * header.e_shentsize]);
    for (const section of sections) {
      if (section.sh_type !== SHT.SHT_NOBITS) ranges.push([section.sh_offset, section.sh_offset + section.sh_size]);
    }
    return covered(ranges, oldSize, source.size);
  } catch {
    return 0; // not ELF (or unreadable): all of its growth counts as excess
  } finally {
    source.close();
  }
}

/** Compares every regular file of `patched` with the same path in `original`. */
export async function measureGrowth(original: string, patched: string): Promise<GrowthReport> {
  const grown: FileGrowth[] = [];
  for await (const path of regularFiles(patched)) {
    const relativePath = relative(patched, path);
    const [before, after] = await Promise.all([lstat(join(original, relativePath)), lstat(path)]);
    if (after.size <= before.size) continue;
    grown.push({ relativePath, growth: after.size - before.size, copiedTables: await copiedTables(path, before.size) });
  }
  const excess = (g: FileGrowth): number => g.growth - g.copiedTables;
  const overSlack = grown.filter((g) => excess(g) > GROWTH_SLACK_BYTES).sort((a, b) => excess(b) - excess(a));
  return {
    filesGrown: grown.length,
    totalGrowth: grown.reduce((sum, g) => sum + g.growth, 0),
    largestGrowth: Math.max(0, ...grown.map((g) => g.growth)),
    overSlack,
    largestExcess: Math.max(0, ...grown.map(excess)),
  };
}
