// Reader micro-benchmark: the header + summary of a ~10 KiB library against the same library grown to
// ~1 GiB with sparse zeros. The reader only reads the structures it needs, so both must cost the same few
// KiB of reads and about the same time.
//
// Run: npx vite-node bench/reader.bench.ts [SMALL_LIBRARY]

import { stat } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readerBenchmarks } from './lib/micro-benchmarks.js';

const repoRoot = resolve(fileURLToPath(new URL('..', import.meta.url)));

interface ManifestEntry {
  path: string;
  kind?: string;
  arch?: string;
  tags?: string[];
}

/** A small real shared library: the argument, else the x86_64 library of the fixture manifest closest to 10 KiB. */
async function smallLibrary(): Promise<string> {
  const given = process.argv[2];
  if (given !== undefined) return resolve(given);
  const manifestPath = join(repoRoot, 'fixtures', '.cache', 'manifest.json');
  if (!existsSync(manifestPath)) throw new Error(`no library given and no ${manifestPath}: run \`npm run fixtures\` or pass a path`);
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { fixtures?: ManifestEntry[] } | ManifestEntry[];
  const entries = Array.isArray(manifest) ? manifest : (manifest.fixtures ?? []);
  const libraries = await Promise.all(
    entries
      // A library as linkers usually leave it: with section headers.
      .filter((e) => e.kind === 'shared' && e.arch === 'x86_64' && !(e.tags ?? []).includes('no-sections'))
      .map(async (e) => {
        const path = resolve(repoRoot, e.path);
        return { path, size: (await stat(path)).size };
      }),
  );
  const closest = libraries.sort((a, b) => Math.abs(a.size - 10 * 1024) - Math.abs(b.size - 10 * 1024))[0];
  if (closest === undefined) throw new Error('the fixture manifest has no x86_64 shared library');
  return closest.path;
}

const small = await smallLibrary();
const rows = await readerBenchmarks(small);
console.log(`reader: image + summary (${small})`);
console.table(
  rows.map((row) => ({
    file: row.name,
    'bytes read': row.note,
    'mean (µs)': row.meanMicros.toFixed(1),
    'p99 (µs)': row.p99Micros.toFixed(1),
    samples: row.samples,
  })),
);
const [a, b] = rows;
if (a !== undefined && b !== undefined && a.note !== b.note) {
  console.error(`bytes read differ: ${a.note} vs ${b.note}: the reader is reading by file size`);
  process.exitCode = 1;
}
