// `print` shows what a compat libcuda says of itself in `.note.cuda.fwd_compatibility`: the CUDA release,
// the driver branches and the devices. Proven on libraries built with gcc as NVIDIA lays the note out
// (an SHT_NOTE section in the first PT_LOAD, owner "NVIDIA Corporation", type 0): what print reads is
// what readelf decodes, byte for byte; the driver's own libcuda has no note and no row; a note that
// cannot be read is a warning naming the file, and print goes on.

import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildStandIn, NOTE_580 } from './helpers/driver-stand-ins.js';
import { loadSegments, programHeaders, readelfText, section } from './helpers/readelf.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { useTempDir } from './helpers/use-temp-dir.js';

const dir = useTempDir('print-compat-note');
let compat: string;
let driver: string;
let malformed: string;

/** The description of the NVIDIA note as readelf -n decodes it (its hex dump), as text. */
async function readelfDescription(file: string): Promise<string> {
  const notes = await readelfText(['-n'], file);
  const block = notes.slice(notes.indexOf('Displaying notes found in: .note.cuda.fwd_compatibility'));
  expect(block).toMatch(/NVIDIA Corporation\s+0x[0-9a-f]+\s+Unknown note type: \(0x00000000\)/);
  const hex = /description data: ((?:[0-9a-f]{2} )+)/.exec(block)?.[1] ?? '';
  return Buffer.from(hex.replace(/ /g, ''), 'hex').toString('utf8').replace(/\0+$/, '');
}

beforeAll(async () => {
  assertCliBuilt();
  const base = { soname: 'libcuda.so.1', name: 'libcuda' };
  compat = await buildStandIn({
    ...base,
    dir: join(dir(), 'compat'),
    version: '580.95.05',
    label: 'compat',
    note: JSON.stringify(NOTE_580),
  });
  driver = await buildStandIn({ ...base, dir: join(dir(), 'driver'), version: '580.159.04', label: 'driver', note: null });
  malformed = await buildStandIn({
    ...base,
    dir: join(dir(), 'malformed'),
    version: '590.44.01',
    label: 'compat',
    note: '{"format":1,"driver":[58',
  });
});

describe('print and the compat note', () => {
  it('the note lies where NVIDIA puts it: an SHT_NOTE section inside the first PT_LOAD (readelf)', async () => {
    const note = await section(compat, '.note.cuda.fwd_compatibility');
    expect(note.type).toBe('NOTE');
    const first = loadSegments(await programHeaders(compat))[0];
    expect(first).toBeDefined();
    expect(note.offset).toBeGreaterThanOrEqual(first?.offset ?? Infinity);
    expect(note.offset + note.size).toBeLessThanOrEqual((first?.offset ?? 0) + (first?.filesz ?? 0));
  });

  it('--json gives the note readelf decodes: CUDA release, driver branches, devices', async () => {
    const result = await runCli(['print', '--json', compat, driver]);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toBe('');
    const [withNote, without] = JSON.parse(result.stdout) as { cudaCompat: unknown }[];
    const decoded = JSON.parse(await readelfDescription(compat)) as typeof NOTE_580;
    expect(withNote?.cudaCompat).toEqual({
      format: decoded.format,
      cudaVersion: decoded['CUDA version'],
      driver: decoded.driver,
      device: decoded.device,
    });
    expect(withNote?.cudaCompat).toEqual({
      format: 1,
      cudaVersion: '13.0',
      driver: [535, 550, 565, 570, 575, 580],
      device: [1, 2, 7, 8, 9, 10, 11, 12, 13, 14],
    });
    expect(without?.cudaCompat).toBeNull();
  });

  it('the text has a "cuda compat" row for the compat libcuda only', async () => {
    const result = await runCli(['print', compat, driver]);
    expect(result.code, result.stderr).toBe(0);
    const [compatText, driverText] = result.stdout.split(`${driver}\n`);
    expect(compatText).toContain('  cuda compat  CUDA 13.0; driver branches 535 550 565 570 575 580; devices 1 2 7 8 9 10 11 12 13 14\n');
    expect(driverText).not.toContain('cuda compat');
  });

  it('a note that cannot be read is a warning naming the file and what is wrong; print goes on and exits 0', async () => {
    expect(await readelfDescription(malformed)).toBe('{"format":1,"driver":[58');
    const result = await runCli(['print', '--json', malformed, compat]);
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(
      new RegExp(
        `^cuda-patchelf: ${malformed}: warning: \\.note\\.cuda\\.fwd_compatibility cannot be read: the description is not JSON \\(.+\\)\\n$`,
      ),
    );
    const [bad, good] = JSON.parse(result.stdout) as { cudaCompat: { error?: string } | null }[];
    expect(bad?.cudaCompat?.error).toMatch(/^the description is not JSON/);
    expect(good?.cudaCompat).not.toBeNull();
    const text = await runCli(['print', malformed]);
    expect(text.stdout).toMatch(/\n {2}cuda compat {2}unreadable note \(the description is not JSON \(.+\)\)\n/);
  });
});
