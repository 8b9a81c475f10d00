// The dynamic section as GNU readelf lists it (`readelf -dW`): binutils reads the file with none of the
// code under test, so what it says about DT_RUNPATH, DT_RPATH, DT_NEEDED, DT_SONAME and the numeric tags
// is an independent oracle. Every test that reads these back through readelf parses them here.

import { requireTool } from './fixtures.js';
import { mustExec } from './exec.js';

export interface DynamicRow {
  /** The tag as readelf names it: NEEDED, RUNPATH, INIT… */
  readonly tag: string;
  /** The value column: a number, or "Shared library: [x]" style text. */
  readonly value: string;
}

/** Every row of a `readelf -d` listing, DT_NULL included; other output (other options' sections) is ignored. */
export function parseDynamicRows(output: string): DynamicRow[] {
  const rows: DynamicRow[] = [];
  for (const line of output.split('\n')) {
    const match = /^\s*0x[0-9a-f]+\s+\(([^)]+)\)\s+(.*)$/.exec(line);
    if (match !== null) rows.push({ tag: match[1] as string, value: (match[2] as string).trim() });
  }
  return rows;
}

/** The string a row names ("Library runpath: [x]" → x); null where readelf prints none (a bad string offset). */
export function bracketedString(row: DynamicRow): string | null {
  return /\[(.*)\]$/.exec(row.value)?.[1] ?? null;
}

/** The number at the start of a row's value (an address, or a size in bytes); throws when there is none. */
export function rowNumber(row: DynamicRow, file: string): number {
  const match = /^(0x[0-9a-f]+|\d+)/.exec(row.value);
  if (match === null) throw new Error(`readelf -d ${file}: ${row.tag} has no number: ${row.value}`);
  // BigInt reads both the 0x form and the decimal one, and every digit of a 64-bit value.
  return Number(BigInt(match[1] as string));
}

export interface DynamicFacts {
  readonly runpath: string | null;
  readonly rpath: string | null;
  readonly needed: readonly string[];
  readonly soname: string | null;
}

/** The search paths, dependencies and soname of the rows (the last entry wins where a tag repeats). */
export function dynamicFacts(rows: readonly DynamicRow[]): DynamicFacts {
  let runpath: string | null = null;
  let rpath: string | null = null;
  let soname: string | null = null;
  const needed: string[] = [];
  for (const row of rows) {
    const value = bracketedString(row);
    if (row.tag === 'RUNPATH') runpath = value;
    else if (row.tag === 'RPATH') rpath = value;
    else if (row.tag === 'SONAME') soname = value;
    else if (row.tag === 'NEEDED' && value !== null) needed.push(value);
  }
  return { runpath, rpath, needed, soname };
}

/** `readelf -dW FILE`'s rows, DT_NULL excluded: the padding at the end of the array says nothing a test checks. */
export async function dynamicRows(file: string): Promise<DynamicRow[]> {
  const text = (await mustExec(requireTool('readelf'), ['-dW', file])).stdout;
  return parseDynamicRows(text).filter((row) => row.tag !== 'NULL');
}

/** The bracketed strings of a tag (NEEDED → library names, RUNPATH → one value); the raw value where there is none. */
export async function dynamicStrings(file: string, tag: string): Promise<string[]> {
  return (await dynamicRows(file)).filter((row) => row.tag === tag).map((row) => bracketedString(row) ?? row.value);
}

/** The numeric value of the first entry with this tag, or null. */
export async function dynamicNumber(file: string, tag: string): Promise<number | null> {
  const row = (await dynamicRows(file)).find((r) => r.tag === tag);
  return row === undefined ? null : rowNumber(row, file);
}

/** `readelf -dW`: the file's dynamic entries, or null when it has no dynamic section. */
export async function readDynamic(path: string): Promise<DynamicFacts | null> {
  const result = await mustExec(requireTool('readelf'), ['-dW', path]);
  if (/There is no dynamic section in this file/.test(result.stdout)) return null;
  const rows = parseDynamicRows(result.stdout);
  if (rows.length === 0) throw new Error(`readelf -dW ${path}: no dynamic entries parsed from\n${result.stdout}`);
  return dynamicFacts(rows);
}

/** The runpath tag a file carries, as readelf names it. */
export type TagKind = 'RUNPATH' | 'RPATH' | 'none';

export function tagKind(facts: DynamicFacts): TagKind {
  return facts.runpath !== null ? 'RUNPATH' : facts.rpath !== null ? 'RPATH' : 'none';
}

/** The search path ld.so uses for the file's own dependencies: DT_RUNPATH, else DT_RPATH, else null. */
export function effectiveRunpath(facts: DynamicFacts): string | null {
  return facts.runpath ?? facts.rpath;
}
