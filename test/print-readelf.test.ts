// `print --json` agrees with GNU readelf on every field it shows, for every fixture, in one multi-file call.

import { open } from 'node:fs/promises';
import { beforeAll, describe, expect, it } from 'vitest';
import { fixtures, requireTool } from './helpers/fixtures.js';
import { assertCliBuilt, runCli } from './helpers/run-cli.js';
import { mapLimited } from './helpers/map-limited.js';
import { pickFields } from './helpers/pick-fields.js';
import {
  bracketedString,
  parseDynamicRows,
  parseInterpreter,
  parseProgramHeaders,
  readelfText,
  type DynamicRow,
} from './helpers/readelf.js';

interface Load {
  offset: number;
  vaddr: number;
  filesz: number;
  memsz: number;
  align: number;
  flags: string;
}

interface PrintRecord {
  file: string;
  class: string;
  byteOrder: string;
  machine: string;
  type: string;
  interpreter: string | null;
  soname: string | null;
  needed: string[];
  rpath: string | null;
  runpath: string | null;
  flags: string[];
  flags1: string[];
  loads: Load[];
  spareDynamicSlots: number | null;
  error?: unknown;
}

/**
 * readelf's `Machine:` text → the EM_ name print uses. Kept small on purpose: a fixture of a new machine
 * fails here until its readelf name is added, rather than passing on a guess.
 */
const READELF_MACHINES: Record<string, string> = {
  'Advanced Micro Devices X86-64': 'EM_X86_64',
  AArch64: 'EM_AARCH64',
  ARM: 'EM_ARM',
  PowerPC64: 'EM_PPC64',
  PowerPC: 'EM_PPC',
  'Intel 80386': 'EM_386',
  'NVIDIA CUDA architecture': 'EM_CUDA',
  'RISC-V': 'EM_RISCV',
  'IBM S/390': 'EM_S390',
  'MIPS R3000': 'EM_MIPS',
  LoongArch: 'EM_LOONGARCH',
};

/** What readelf shows of the same fields, plus what the spare-slot count is derived from. */
interface ReadelfView extends Omit<PrintRecord, 'file' | 'spareDynamicSlots' | 'error'> {
  /** PT_DYNAMIC's file range, for the raw count of spare slots. */
  dynamicSegment: { offset: number; filesz: number } | null;
  /** "contains N entries": readelf counts up to and including the first DT_NULL. */
  dynamicEntryCount: number | null;
}

function field(text: string, pattern: RegExp, what: string): string {
  const match = pattern.exec(text);
  if (match?.[1] === undefined) throw new Error(`readelf output has no ${what}:\n${text}`);
  return match[1];
}

/** A tag's string; readelf printing none would be a fixture this test cannot check, so it throws. */
function bracketed(row: DynamicRow): string {
  const value = bracketedString(row);
  if (value === null) throw new Error(`no [value] in readelf line: ${row.value}`);
  return value;
}

function parseReadelf(text: string): ReadelfView {
  const machineText = field(text, /^\s*Machine:\s+(.+?)\s*$/m, 'Machine');
  const machine = READELF_MACHINES[machineText];
  if (machine === undefined) throw new Error(`readelf machine "${machineText}" is not in READELF_MACHINES`);

  const segments = parseProgramHeaders(text);
  const dynamic = segments.filter((s) => s.type === 'DYNAMIC').at(-1);
  const loads: Load[] = segments
    .filter((s) => s.type === 'LOAD')
    .map(({ offset, vaddr, filesz, memsz, align, flags }) => ({ offset, vaddr, filesz, memsz, align, flags }));

  const view: ReadelfView = {
    class: field(text, /^\s*Class:\s+(ELF32|ELF64)\s*$/m, 'Class'),
    byteOrder: `${field(text, /^\s*Data:\s+2's complement, (little|big) endian\s*$/m, 'Data')}-endian`,
    machine,
    type: `ET_${field(text, /^\s*Type:\s+(\w+)/m, 'Type')}`,
    interpreter: parseInterpreter(text),
    soname: null,
    needed: [],
    rpath: null,
    runpath: null,
    flags: [],
    flags1: [],
    loads,
    dynamicSegment: dynamic === undefined ? null : { offset: dynamic.offset, filesz: dynamic.filesz },
    dynamicEntryCount: null,
  };
  const count = /^Dynamic section at offset 0x[0-9a-f]+ contains (\d+) entr(?:y|ies):$/m.exec(text)?.[1];
  if (count !== undefined) view.dynamicEntryCount = Number(count);
  for (const row of parseDynamicRows(text)) {
    const { tag, value } = row;
    switch (tag) {
      case 'NEEDED':
        view.needed.push(bracketed(row));
        break;
      // print reports the first entry of a tag that should appear once.
      case 'SONAME':
        view.soname ??= bracketed(row);
        break;
      case 'RPATH':
        view.rpath ??= bracketed(row);
        break;
      case 'RUNPATH':
        view.runpath ??= bracketed(row);
        break;
      case 'FLAGS':
        view.flags = value.split(/\s+/).filter((word) => word.length > 0);
        break;
      case 'FLAGS_1':
        view.flags1 = value
          .replace(/^Flags:/, '')
          .split(/\s+/)
          .filter((word) => word.length > 0);
        break;
      default:
    }
  }
  return view;
}

/**
 * Spare DT_NULL slots counted from the raw bytes of PT_DYNAMIC (located by readelf), decoded here by
 * hand: readelf stops at the first DT_NULL and cannot show them, and the reader under test must not be
 * its own oracle.
 */
async function rawDynamicTags(path: string, view: ReadelfView): Promise<{ terminator: number; spare: number } | null> {
  if (view.dynamicSegment === null) return null;
  const entrySize = view.class === 'ELF64' ? 16 : 8;
  const capacity = Math.floor(view.dynamicSegment.filesz / entrySize);
  const bytes = Buffer.alloc(capacity * entrySize);
  const handle = await open(path, 'r');
  try {
    const { bytesRead } = await handle.read(bytes, 0, bytes.length, view.dynamicSegment.offset);
    if (bytesRead !== bytes.length) throw new Error(`${path}: PT_DYNAMIC runs past the end of the file`);
  } finally {
    await handle.close();
  }
  const little = view.byteOrder === 'little-endian';
  const tagAt = (i: number): bigint => {
    const at = i * entrySize;
    if (entrySize === 16) return little ? bytes.readBigInt64LE(at) : bytes.readBigInt64BE(at);
    return BigInt(little ? bytes.readInt32LE(at) : bytes.readInt32BE(at));
  };
  let terminator = 0;
  while (terminator < capacity && tagAt(terminator) !== 0n) terminator++;
  if (terminator === capacity) throw new Error(`${path}: no DT_NULL in PT_DYNAMIC`);
  let spare = 0;
  for (let i = terminator + 1; i < capacity && tagAt(i) === 0n; i++) spare++;
  return { terminator, spare };
}

const all = fixtures();
const paths = all.map((f) => f.path);
let records: PrintRecord[] = [];
let multi: Awaited<ReturnType<typeof runCli>>;
const oracle = new Map<string, { view: ReadelfView; raw: { terminator: number; spare: number } | null }>();

beforeAll(async () => {
  requireTool('readelf');
  assertCliBuilt();
  expect(all.length).toBeGreaterThan(0);
  multi = await runCli(['print', '--json', ...paths], { timeoutMs: 60_000 });
  records = JSON.parse(multi.stdout) as PrintRecord[];
  await mapLimited(all, 4, async (fixture) => {
    const view = parseReadelf(await readelfText(['-hld'], fixture.path));
    oracle.set(fixture.path, { view, raw: await rawDynamicTags(fixture.path, view) });
  });
});

describe('print --json on every fixture in one call', () => {
  it('exits 0, prints nothing on stderr and one record per file in argument order', () => {
    expect(multi.stderr).toBe('');
    expect(multi.code).toBe(0);
    expect(records.map((r) => r.file)).toEqual(paths);
    expect(records.filter((r) => r.error !== undefined)).toEqual([]);
  });

  it('covers every kind of file the tool is for', () => {
    const views = [...oracle.values()].map((o) => o.view);
    const kinds: [string, (v: ReadelfView) => boolean][] = [
      ['x86_64 fixtures', (v) => v.machine === 'EM_X86_64'],
      ['aarch64 fixtures', (v) => v.machine === 'EM_AARCH64'],
      ['ELF32 fixtures', (v) => v.class === 'ELF32'],
      ['big-endian fixtures', (v) => v.byteOrder === 'big-endian'],
      ['fixtures with PT_INTERP', (v) => v.interpreter !== null],
      ['fixtures with DT_SONAME', (v) => v.soname !== null],
      ['fixtures with DT_RUNPATH', (v) => v.runpath !== null],
      ['fixtures with DT_RPATH', (v) => v.rpath !== null],
      ['fixtures with DT_NEEDED', (v) => v.needed.length > 0],
      ['fixtures with DT_FLAGS', (v) => v.flags.length > 0],
      ['fixtures with DT_FLAGS_1', (v) => v.flags1.length > 0],
      ['fixtures without PT_DYNAMIC', (v) => v.dynamicSegment === null],
    ];
    for (const [label, predicate] of kinds) expect.soft(views.filter(predicate).length, label).toBeGreaterThan(0);
    for (const origin of ['compiled', 'debian', 'cuda', 'npm'] as const) {
      expect.soft(all.filter((f) => f.origin === origin).length, `${origin} fixtures`).toBeGreaterThan(0);
    }
  });

  describe.each(all.map((f) => ({ id: f.id, path: f.path })))('$id', ({ path }) => {
    const record = (): PrintRecord => {
      const found = records.find((r) => r.file === path);
      if (found === undefined) throw new Error(`print --json has no record for ${path}`);
      return found;
    };
    const readelf = (): ReadelfView => {
      const found = oracle.get(path)?.view;
      if (found === undefined) throw new Error(`no readelf output for ${path}`);
      return found;
    };

    const fieldGroups = [
      { name: 'header: class, byte order, machine, type', fields: ['class', 'byteOrder', 'machine', 'type'] as const },
      { name: 'interpreter, soname, needed, rpath, runpath', fields: ['interpreter', 'soname', 'needed', 'rpath', 'runpath'] as const },
      { name: 'DT_FLAGS and DT_FLAGS_1 bits', fields: ['flags', 'flags1'] as const },
    ];
    for (const { name, fields } of fieldGroups) {
      it(name, () => {
        expect(pickFields(record(), fields)).toEqual(pickFields(readelf(), fields));
      });
    }

    it('every PT_LOAD: offset, vaddr, filesz, memsz, align, flags', () => {
      const r = record();
      const v = readelf();
      expect(v.loads.length).toBeGreaterThan(0);
      expect(r.loads).toEqual(v.loads);
    });

    it('spare DT_NULL slots', () => {
      const r = record();
      const o = oracle.get(path);
      if (o === undefined) throw new Error(`no readelf output for ${path}`);
      if (o.raw === null) {
        expect(o.view.dynamicEntryCount).toBeNull();
        expect(r.spareDynamicSlots).toBeNull();
      } else {
        // The hand decoder finds the same terminator readelf stops at.
        expect(o.raw.terminator + 1).toBe(o.view.dynamicEntryCount);
        expect(r.spareDynamicSlots).toBe(o.raw.spare);
      }
    });
  });
});
