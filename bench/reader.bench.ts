// Reader micro-benchmark: the header + summary of a ~10 KiB library against the same library grown to
// ~1 GiB with sparse zeros. The reader only reads the structures it needs, so both must cost the same few
// KiB of reads and about the same time.
//
// Run: npx vite-node bench/reader.bench.ts [SMALL_LIBRARY]

import { copyFile, mkdtemp, rm, stat, truncate } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Bench } from 'tinybench';
import { FileByteSource } from '../src/elf/byte-source.js';
import { readElfImage } from '../src/elf/elf-image.js';
import { summarize } from '../src/elf/summary.js';

const GIB = 1024 ** 3;
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

/** One full read as `print` does it; returns how many bytes came off the file. */
async function readOnce(path: string): Promise<number> {
  const source = await FileByteSource.open(path);
  try {
    await summarize(await readElfImage(source));
    return source.bytesRead;
  } finally {
    await source.close();
  }
}

const small = await smallLibrary();
const dir = await mkdtemp(join(tmpdir(), 'cuda-patchelf-bench-'));
try {
  const big = join(dir, `${basename(small)}.1gib`);
  await copyFile(small, big);
  // Sparse: the file is 1 GiB long but takes no disk space, and the ELF structures stay at the front.
  await truncate(big, (await stat(small)).size + GIB);

  const files = [
    { name: 'small library', path: small },
    { name: 'same + 1 GiB sparse', path: big },
  ];
  const bytesRead = new Map<string, number>();
  for (const file of files) bytesRead.set(file.name, await readOnce(file.path));

  const bench = new Bench({ name: 'reader: image + summary', time: 1_000, warmupTime: 200 });
  for (const file of files) bench.add(file.name, () => readOnce(file.path).then(() => undefined));
  await bench.run();

  const rows = await Promise.all(
    files.map(async (file) => {
      const task = bench.getTask(file.name);
      const result = task?.result;
      const latency = result !== undefined && 'latency' in result ? result.latency : undefined;
      return {
        file: file.name,
        'size (bytes)': (await stat(file.path)).size,
        'bytes read': bytesRead.get(file.name) ?? NaN,
        'mean (µs)': latency === undefined ? NaN : Number((latency.mean * 1000).toFixed(1)),
        'p99 (µs)': latency?.p99 === undefined ? NaN : Number((latency.p99 * 1000).toFixed(1)),
        samples: latency?.samplesCount ?? 0,
      };
    }),
  );
  console.log(`${bench.name} (${small})`);
  console.table(rows);
  const [a, b] = rows;
  if (a !== undefined && b !== undefined && a['bytes read'] !== b['bytes read']) {
    console.error(`bytes read differ: ${a['bytes read']} vs ${b['bytes read']}: the reader is reading by file size`);
    process.exitCode = 1;
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
