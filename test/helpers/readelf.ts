// What GNU readelf (binutils) says of a file, parsed: an oracle that shares no code with the reader
// under test, and reads every architecture. Every test that reads a file back through readelf does it
// here: readelfText for a listing a test compares as text, and parsers for the ELF header, the program
// headers, the interpreter, the dynamic entries, the section headers and the symbols.

import { requireTool } from './fixtures.js';
import { execTool, mustExec, type ExecResult } from './exec.js';

/** `readelf -W ARGS FILE`; never throws on a failure, the result says what happened (a check of a file readelf may refuse). */
export function runReadelf(args: readonly string[], file: string): Promise<ExecResult> {
  return execTool(requireTool('readelf'), ['-W', ...args, file]);
}

/** `readelf -W ARGS FILE`'s output; throws unless readelf exits 0. */
export async function readelfText(args: readonly string[], file: string): Promise<string> {
  return (await mustExec(requireTool('readelf'), ['-W', ...args, file])).stdout;
}

/** A column readelf prints in hexadecimal, with or without 0x (BigInt keeps every digit of a 64-bit value). */
const hex = (text: string): number => Number(BigInt(text.startsWith('0x') ? text : `0x${text}`));
/** A column readelf prints in decimal, or in hexadecimal with 0x (a large size, an alignment). */
const decimalOrHex = (text: string): number => Number(BigInt(text));

// ---- The ELF header (-h) ----

export interface HeaderFields {
  readonly phoff: number;
  readonly phnum: number;
  readonly type: string;
}

export async function elfHeader(file: string): Promise<HeaderFields> {
  const text = await readelfText(['-h'], file);
  const field = (label: string): string => {
    const m = new RegExp(`^\\s*${label}:\\s+(.*)$`, 'm').exec(text);
    if (m === null) throw new Error(`readelf -h ${file}: no "${label}"`);
    return (m[1] as string).trim();
  };
  return {
    phoff: Number(/^(\d+)/.exec(field('Start of program headers'))?.[1]),
    phnum: Number(field('Number of program headers')),
    type: field('Type').split(' ')[0] ?? '',
  };
}

// ---- The program headers (-l) ----

export interface SegmentRow {
  /** The type as readelf names it: LOAD, DYNAMIC, PHDR, GNU_STACK… */
  readonly type: string;
  readonly offset: number;
  readonly vaddr: number;
  readonly paddr: number;
  readonly filesz: number;
  readonly memsz: number;
  /** The three flag columns as readelf prints them ("R E", "RW "). */
  readonly flags: string;
  readonly align: number;
}

/** The program headers of a `readelf -l` listing, in table order; other output is ignored. */
export function parseProgramHeaders(text: string): SegmentRow[] {
  const rows: SegmentRow[] = [];
  const pattern =
    /^\s+(\S+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+([RWE ]{3})\s+(0x[0-9a-f]+|\d+)\s*$/;
  for (const line of text.split('\n')) {
    const m = pattern.exec(line);
    if (m === null) continue;
    rows.push({
      type: m[1] as string,
      offset: hex(m[2] as string),
      vaddr: hex(m[3] as string),
      paddr: hex(m[4] as string),
      filesz: hex(m[5] as string),
      memsz: hex(m[6] as string),
      flags: m[7] as string,
      // readelf prints an alignment of 0 as "0".
      align: decimalOrHex(m[8] as string),
    });
  }
  return rows;
}

/** `readelf -lW FILE`'s program headers. */
export async function programHeaders(file: string): Promise<SegmentRow[]> {
  return parseProgramHeaders(await readelfText(['-l'], file));
}

/** The PT_LOAD rows, in table order. */
export function loadSegments(rows: readonly SegmentRow[]): SegmentRow[] {
  return rows.filter((r) => r.type === 'LOAD');
}

/** The first program header of a type (DYNAMIC, PHDR, INTERP…); a file without one fails the test. */
export function segmentOfType(rows: readonly SegmentRow[], type: string): SegmentRow {
  const found = rows.find((r) => r.type === type);
  if (found === undefined) throw new Error(`no ${type} program header`);
  return found;
}

/** PT_DYNAMIC's file offset, or null when the file has none. */
export async function dynamicSegmentOffset(file: string): Promise<number | null> {
  return (await programHeaders(file)).find((row) => row.type === 'DYNAMIC')?.offset ?? null;
}

/** The file offset of a virtual address, through the PT_LOADs. */
export function offsetOfAddress(rows: readonly SegmentRow[], vaddr: number): number {
  const load = rows.find((r) => r.type === 'LOAD' && vaddr >= r.vaddr && vaddr < r.vaddr + r.filesz);
  if (load === undefined) throw new Error(`address 0x${vaddr.toString(16)} is not in any PT_LOAD`);
  return load.offset + (vaddr - load.vaddr);
}

/** The path of `[Requesting program interpreter: PATH]` in a `readelf -l` listing, or null when there is none. */
export function parseInterpreter(text: string): string | null {
  return /\[Requesting program interpreter: (.*)\]$/m.exec(text)?.[1] ?? null;
}

/** The interpreter (PT_INTERP) readelf reads from the file, or null. */
export async function interpreterOf(file: string): Promise<string | null> {
  return parseInterpreter(await readelfText(['-l'], file));
}

// ---- The dynamic section (-d) ----

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
  return parseDynamicRows(await readelfText(['-d'], file)).filter((row) => row.tag !== 'NULL');
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
  const text = await readelfText(['-d'], path);
  if (/There is no dynamic section in this file/.test(text)) return null;
  const rows = parseDynamicRows(text);
  if (rows.length === 0) throw new Error(`readelf -dW ${path}: no dynamic entries parsed from\n${text}`);
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

// ---- The section headers (-S) ----

export interface SectionRow {
  readonly name: string;
  readonly type: string;
  readonly addr: number;
  readonly offset: number;
  readonly size: number;
}

export async function sectionRows(file: string): Promise<SectionRow[]> {
  const rows: SectionRow[] = [];
  for (const line of (await readelfText(['-S'], file)).split('\n')) {
    const m = /^\s*\[\s*\d+\]\s+(\S*)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s/.exec(line);
    if (m === null || m[2] === 'NULL') continue;
    rows.push({
      name: m[1] as string,
      type: m[2] as string,
      addr: hex(m[3] as string),
      offset: hex(m[4] as string),
      size: hex(m[5] as string),
    });
  }
  return rows;
}

export async function section(file: string, name: string): Promise<SectionRow> {
  const found = (await sectionRows(file)).find((s) => s.name === name);
  if (found === undefined) throw new Error(`${file} has no section ${name}`);
  return found;
}

// ---- Symbols (-s, --dyn-syms) ----

export interface SymbolRow {
  readonly value: number;
  readonly size: number;
  /** The name column as readelf prints it (with @VERSION where the symbol has one); '' for none. */
  readonly name: string;
}

/** The symbol rows of a `readelf -s` or `--dyn-syms` listing, every table in it, in order. */
export function parseSymbols(text: string): SymbolRow[] {
  const rows: SymbolRow[] = [];
  for (const line of text.split('\n')) {
    const [index, value, size, , , , , name = ''] = line.trim().split(/\s+/);
    if (index === undefined || !/^\d+:$/.test(index) || value === undefined || size === undefined) continue;
    rows.push({ value: hex(value), size: decimalOrHex(size), name });
  }
  return rows;
}

/** The address of a symbol in the static symbol table (readelf -s). */
export async function symbolAddress(file: string, name: string): Promise<number> {
  const found = parseSymbols(await readelfText(['-s'], file)).find((s) => s.name === name);
  if (found === undefined) throw new Error(`${file} has no symbol ${name}`);
  return found.value;
}
