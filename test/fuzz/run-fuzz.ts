// npm run fuzz -- --iterations N --seed S [--from I] [--report FILE] [--save-failures DIR]
//
// Runs the read → plan → write fuzzer (fuzz-campaign.ts) and prints its figures as JSON; exits 1 when
// any input crashed, hung or read back wrong, listing those inputs (each replays with --seed S --from I
// --iterations 1). --report writes the figures and failures to a file as well; --save-failures DIR keeps
// each failing input and the file the tool wrote from it.

import { rm, writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { fuzzBases } from '../helpers/fuzz-bases.js';
import { runFuzz, type FuzzFigures } from './fuzz-campaign.js';
import { makeTempDir, MEMORY_TMP } from '../helpers/temp-dir.js';

const USAGE =
  'usage: npm run fuzz -- [--iterations N] [--seed S] [--from I] [--report FILE] [--save-failures DIR] ' +
  '[--time-cap-ms MS] [--rss-cap-mib MIB]';

/** The command line as values, or the one line that says what is wrong with it. */
function parseCommandLine(): { ok: true; values: ReturnType<typeof parseFuzzArgs>['values'] } | { ok: false; message: string } {
  try {
    return { ok: true, values: parseFuzzArgs().values };
  } catch (error) {
    return { ok: false, message: error instanceof Error ? error.message : String(error) };
  }
}

function parseFuzzArgs() {
  return parseArgs({
    options: {
      help: { type: 'boolean', short: 'h' },
      iterations: { type: 'string', default: '100000' },
      seed: { type: 'string', default: '1' },
      from: { type: 'string', default: '0' },
      report: { type: 'string' },
      'save-failures': { type: 'string' },
      'time-cap-ms': { type: 'string', default: '2000' },
      'rss-cap-mib': { type: 'string', default: '1024' },
    },
  });
}

const parsed = parseCommandLine();
if (!parsed.ok) {
  console.error(`fuzz: ${parsed.message}\n${USAGE}`);
  process.exit(2);
}
if (parsed.values.help) {
  console.log(USAGE);
  process.exit(0);
}
const { values } = parsed;

function whole(name: string, text: string | undefined): number {
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`--${name} takes a whole number, not "${String(text)}"`);
  return value;
}

function line(f: FuzzFigures): string {
  const refused = Object.entries(f.refused)
    .map(([kind, n]) => `${n} ${kind}`)
    .join(', ');
  return (
    `${f.iterations} inputs (${f.distinctInputs} distinct) in ${f.wallSeconds.toFixed(0)} s: ${f.written} written, ${f.noop} noop, ${f.skipped} skipped, refused ${refused || 'none'}; ` +
    `${f.crashes} crashes, ${f.hangs} hangs, ${f.wrongResults} wrong results; slowest ${f.maxInputMs.toFixed(1)} ms; peak RSS ${(f.peakRssBytes / 2 ** 20).toFixed(0)} MiB`
  );
}

async function main(): Promise<number> {
  // tmpfs keeps a million scratch writes off the disk; the write path is the same.
  const workDir = await makeTempDir('fuzz', MEMORY_TMP);
  try {
    const { figures, failures } = await runFuzz({
      seed: whole('seed', values.seed) >>> 0,
      iterations: whole('iterations', values.iterations),
      from: whole('from', values.from),
      workDir,
      bases: fuzzBases(),
      timeCapMs: whole('time-cap-ms', values['time-cap-ms']),
      rssCapBytes: whole('rss-cap-mib', values['rss-cap-mib']) * 2 ** 20,
      ...(values['save-failures'] === undefined ? {} : { saveFailuresTo: values['save-failures'] }),
      onProgress: (f) => process.stderr.write(`fuzz: ${line(f)}\n`),
    });
    process.stderr.write(`fuzz: done: ${line(figures)}\n`);
    for (const failure of failures.slice(0, 20)) process.stderr.write(`FAILED ${JSON.stringify(failure, null, 2)}\n`);
    const report = JSON.stringify({ figures, failures }, null, 2);
    if (values.report !== undefined) await writeFile(values.report, `${report}\n`);
    process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
    return failures.length === 0 ? 0 : 1;
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
