// The verification ladder (docs/design.md, How a result is proven) as reusable checks on an edited file: our reader, readelf and
// patchelf read back what was asked for; the program headers keep the invariants the loaders rely on
// (the ELF facts of docs/design.md); eu-elflint finds nothing the original did not have; the file still loads or runs; the same
// edit again is a noop; strip still works on the result. Every check compares with the original
// where a tool is known to be noisy or unable to read some inputs, and never where it is not.

import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { copyFile, cp, mkdir, readFile, rm, stat } from 'node:fs/promises';
import { basename, dirname, join, relative } from 'node:path';
import { expect } from 'vitest';
import { FileByteSource } from '../../src/elf/byte-source.js';
import { type ByteString, byteStringToText } from '../../src/elf/byte-string.js';
import type { ProgramHeader } from '../../src/elf/codec.js';
import { fileOffsetOf, readElfImage, type ElfImage } from '../../src/elf/elf-image.js';
import { readSectionHeaders, type Section } from '../../src/elf/section-headers.js';
import { summarize, type ElfSummary } from '../../src/edit/summary.js';
import { type Arch, machinePageSizeOf } from './arch.js';
import { crossTool, fixture, listDependencies, programVars, requireTool, runOn, type Fixture } from './fixtures.js';
import { runCliInProcess } from './run-cli.js';
import { execTool, type ExecResult } from './exec.js';
import { makeTempDir } from './temp-dir.js';
import { dynamicFacts, parseDynamicRows, rowNumber, runReadelf } from './readelf.js';
import { DT, ET, PF_W, PT, SHF_ALLOC, SHT } from '../../src/elf/constants.js';

/** Run-time page sizes a loader may use on the machine (aarch64 kernels run 4 KiB or 64 KiB pages). */
const RUNTIME_PAGE_SIZES: Readonly<Record<Arch, readonly number[]>> = {
  x86_64: [0x1000],
  aarch64: [0x1000, 0x10000],
  arm: [0x1000],
  ppc64: [0x10000],
};

// ---------------------------------------------------------------------------------------------
// Processes

export function describeExec(what: string, result: ExecResult): string {
  const status = result.signal === null ? `exit ${String(result.code)}` : `signal ${result.signal}`;
  return `${what}: ${status}\n${result.stdout.trim()}\n${result.stderr.trim()}`.trim();
}

/** Problems with an `ld.so --list` result: a failure or a dependency that was not found. */
function listProblems(file: string, result: ExecResult, resolves: readonly string[] = []): string[] {
  const problems: string[] = [];
  const text = `${result.stdout}\n${result.stderr}`;
  if (result.code !== 0 || /=> not found|cannot open shared object|error while loading/.test(text)) {
    problems.push(describeExec(`ld.so --list ${file} failed`, result));
    return problems;
  }
  for (const name of resolves) {
    if (!new RegExp(`^\\s*${escapeRegExp(name)} => /`, 'm').test(result.stdout)) {
      problems.push(`ld.so --list ${file} does not show ${name} resolved:\n${result.stdout.trim()}`);
    }
  }
  return problems;
}

export function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

// ---------------------------------------------------------------------------------------------
// The CLI

export interface EditRecord {
  readonly file: string;
  readonly tier?: string;
  readonly bytesWritten?: number;
  readonly sizeBefore?: number;
  readonly sizeAfter?: number;
  readonly error?: { kind: string; message: string };
}

/**
 * Runs one edit subcommand on FILES with --json; returns one record per file. A failing file gives a
 * record with `error` (and exit status 3), anything else unexpected throws.
 */
async function cliEdit(args: readonly string[], files: readonly string[]): Promise<EditRecord[]> {
  const result = await runCliInProcess([...args, '--json', ...files]);
  if (result.code !== 0 && result.code !== 3) {
    throw new Error(`cuda-patchelf ${args.join(' ')} ${files.join(' ')}: exit ${String(result.code)}\n${result.stderr}`);
  }
  const records = JSON.parse(result.stdout) as EditRecord[];
  if (records.length !== files.length)
    throw new Error(`cuda-patchelf ${args.join(' ')}: ${records.length} records for ${files.length} files`);
  return records;
}

/** One file through the CLI; an error record fails the test with the CLI's message. */
export async function cliEditOne(args: readonly string[], file: string): Promise<EditRecord> {
  const [record] = await cliEdit(args, [file]);
  if (record === undefined) throw new Error('no record');
  if (record.error !== undefined) throw new Error(`cuda-patchelf ${args.join(' ')} ${file}: ${record.error.kind}: ${record.error.message}`);
  return record;
}

// ---------------------------------------------------------------------------------------------
// Copies

/**
 * A private copy of a fixture to edit. Compiled fixtures are copied with their whole directory
 * (bin/ and lib/ side by side, as $ORIGIN runpaths expect); packaged libraries are copied alone
 * and find their dependencies through the fixture's libraryPath.
 */
export async function copyFixture(fixture: Fixture, into: string): Promise<{ root: string; file: string; libDir: string }> {
  await mkdir(into, { recursive: true });
  if (fixture.origin === 'compiled') {
    const dir = dirname(dirname(fixture.path));
    const root = join(into, basename(dir));
    await cp(dir, root, { recursive: true });
    const file = join(root, relative(dir, fixture.path));
    return { root, file, libDir: join(root, 'lib') };
  }
  const file = join(into, basename(fixture.path));
  await copyFile(fixture.path, file);
  return { root: into, file, libDir: into };
}

// ---------------------------------------------------------------------------------------------
// Reading a file back

export interface ReadBack {
  readonly image: ElfImage;
  readonly summary: ElfSummary;
  readonly sections: readonly Section[];
  readonly size: number;
}

/** Our reader on a file: the image, its summary and its section headers. */
/** Originals whose result had its program header table moved and came out of strip with shared pages. */
export const stripAfterMovedTable = new Set<string>();

/** DT_GNU_HASH, DT_HASH, DT_SYMTAB, DT_VERSYM, DT_VERNEED, DT_VERDEF: sections that may move out of the table's way. */
const RELOCATABLE_TAGS: readonly number[] = [DT.DT_GNU_HASH, DT.DT_HASH, DT.DT_SYMTAB, DT.DT_VERSYM, DT.DT_VERNEED, DT.DT_VERDEF];

/** Whether the original's section at `oldAddress` has the same bytes as the patched file at `newAddress`. */
async function sameSectionBytes(
  original: string,
  before: ReadBack,
  oldAddress: number,
  patched: string,
  after: ReadBack,
  newAddress: number,
): Promise<boolean> {
  const section = before.sections.find((s) => s.sh_addr === oldAddress && s.sh_size > 0);
  if (section === undefined) return false;
  const [a, b] = await Promise.all([readFile(original), readFile(patched)]);
  const newOffset = fileOffsetOf(after.image.programHeaders, newAddress, section.sh_size, 'moved section');
  return (
    Buffer.compare(
      a.subarray(section.sh_offset, section.sh_offset + section.sh_size),
      b.subarray(newOffset, newOffset + section.sh_size),
    ) === 0
  );
}

export async function readBack(path: string): Promise<ReadBack> {
  const source = FileByteSource.open(path);
  try {
    const image = await readElfImage(source);
    return { image, summary: await summarize(image), sections: await readSectionHeaders(image), size: source.size };
  } finally {
    source.close();
  }
}

/**
 * The tiers an edit that must place these new strings may take: `append`, or also `in-place` when
 * the string table has a run of zeros long enough to take the longest (an earlier edit's or a
 * linker's slack).
 */
export async function tiersForNewStrings(path: string, strings: readonly string[]): Promise<string[]> {
  const source = FileByteSource.open(path);
  try {
    const image = await readElfImage(source);
    const table = image.dynamicStrings === null ? new Uint8Array() : await image.dynamicStrings.readAll();
    let longest = 0;
    let run = 0;
    for (const byte of table) {
      run = byte === 0 ? run + 1 : 0;
      longest = Math.max(longest, run);
    }
    // The NUL that ends the previous string, the new string, its own NUL.
    const needed = Math.max(...strings.map((value) => Buffer.byteLength(value, 'utf8') + 2));
    return longest >= needed ? ['append', 'in-place'] : ['append'];
  } finally {
    source.close();
  }
}

const text = (value: ByteString | null): string | null => (value === null ? null : byteStringToText(value));

/** The version records readelf prints, without the lines that carry section addresses. */
function versionLines(output: string): string[] {
  return output
    .split('\n')
    .map((line) => line.trimEnd())
    .filter((line) => line !== '' && !/^\s*Addr: /.test(line));
}

/** The dynamic symbol table as readelf prints it, names and versions resolved through .dynstr. */
function dynamicSymbolLines(output: string): string[] {
  return output
    .split('\n')
    .filter((line) => /^\s*\d+: /.test(line))
    .map((line) => line.trimEnd());
}

const readelfCache = new Map<string, Promise<ExecResult>>();
const elflintCache = new Map<string, Promise<Set<string>>>();
const toolReadsCache = new Map<string, Promise<boolean>>();

/** readelf over everything the edit may touch; cached for originals (fixtures never change). */
function readelfAll(path: string, cache: boolean): Promise<ExecResult> {
  const run = (): Promise<ExecResult> => runReadelf(['-h', '-l', '-d', '-S', '-V', '--dyn-syms'], path);
  return cache ? remembered(readelfCache, path, run) : run();
}

/** The promise `cache` holds for `key`, made by `make` the first time. */
function remembered<T>(cache: Map<string, Promise<T>>, key: string, make: () => Promise<T>): Promise<T> {
  const known = cache.get(key);
  if (known !== undefined) return known;
  const made = make();
  cache.set(key, made);
  return made;
}

function splitReadelf(output: string): { dynamic: string; versions: string; symbols: string } {
  const at = (marker: RegExp): number => {
    const match = marker.exec(output);
    return match === null ? -1 : match.index;
  };
  const dynamicAt = at(/^(Dynamic section at offset|There is no dynamic section)/m);
  const versionAt = at(/^(Version (symbols|needs|definition) section|No version information found)/m);
  const symbolsAt = at(/^Symbol table '\.dynsym'/m);
  const end = (from: number, ...next: number[]): number => Math.min(...next.filter((n) => n > from), output.length);
  return {
    dynamic: dynamicAt < 0 ? '' : output.slice(dynamicAt, end(dynamicAt, versionAt, symbolsAt)),
    versions: versionAt < 0 ? '' : output.slice(versionAt, end(versionAt, symbolsAt, dynamicAt)),
    symbols: symbolsAt < 0 ? '' : output.slice(symbolsAt, end(symbolsAt, versionAt, dynamicAt)),
  };
}

/** eu-elflint --gnu-ld's complaints, one per line ("No errors" dropped). */
async function elflintLines(path: string): Promise<Set<string>> {
  const result = await execTool(requireTool('eu-elflint'), ['--gnu-ld', path], { timeoutMs: 300_000 });
  if (result.signal !== null) throw new Error(describeExec(`eu-elflint ${path}`, result));
  const lines = `${result.stdout}\n${result.stderr}`
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && line !== 'No errors');
  return new Set(lines.map((line) => line.replaceAll(path, '<file>')));
}

function originalElflint(path: string): Promise<Set<string>> {
  return remembered(elflintCache, path, () => elflintLines(path));
}

/** Whether a tool accepts the original at all (patchelf 0.14 and strip need section headers). */
function toolReadsOriginal(key: string, run: () => Promise<ExecResult>): Promise<boolean> {
  return remembered(toolReadsCache, key, () => run().then((r) => r.code === 0));
}

async function bytesOf(path: string): Promise<Buffer> {
  return readFile(path);
}

/** A digest of the whole file, read as a stream (the CUDA libraries are large). */
async function digestOf(path: string): Promise<string> {
  const hash = createHash('sha1');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

function countOccurrences(haystack: Buffer, needle: string): number {
  const bytes = Buffer.from(needle, 'latin1');
  let count = 0;
  for (let at = haystack.indexOf(bytes); at >= 0; at = haystack.indexOf(bytes, at + 1)) count++;
  return count;
}

// ---------------------------------------------------------------------------------------------
// Program header invariants

const isLoad = (ph: ProgramHeader): boolean => ph.p_type === PT.PT_LOAD;
const hex = (value: number): string => `0x${value.toString(16)}`;
const describePh = (ph: ProgramHeader): string =>
  `type ${hex(ph.p_type)} offset ${hex(ph.p_offset)} vaddr ${hex(ph.p_vaddr)} filesz ${hex(ph.p_filesz)} memsz ${hex(ph.p_memsz)} align ${hex(ph.p_align)}`;

/** The LOAD whose file part holds [offset, offset+size) at a consistent address, if any. */
function mappingLoad(phs: readonly ProgramHeader[], offset: number, size: number, vaddr: number): ProgramHeader | undefined {
  return phs.find(
    (ph) =>
      isLoad(ph) && offset >= ph.p_offset && offset + size <= ph.p_offset + ph.p_filesz && vaddr - ph.p_vaddr === offset - ph.p_offset,
  );
}

/** Pairs of PT_LOADs (by position, "i-j") whose page-rounded address ranges intersect, described. */
function sharedPages(file: ReadBack, page: number): Map<string, string> {
  const loads = file.image.programHeaders.filter(isLoad);
  const pairs = new Map<string, string>();
  loads.forEach((a, i) => {
    loads.forEach((b, j) => {
      if (j <= i) return;
      const aFirst = Math.floor(a.p_vaddr / page);
      const aLast = Math.floor((a.p_vaddr + Math.max(a.p_memsz, 1) - 1) / page);
      const bFirst = Math.floor(b.p_vaddr / page);
      const bLast = Math.floor((b.p_vaddr + Math.max(b.p_memsz, 1) - 1) / page);
      if (aFirst <= bLast && bFirst <= aLast) pairs.set(`${i}-${j}`, `${describePh(a)} and ${describePh(b)}`);
    });
  });
  return pairs;
}

export interface LayoutFacts {
  /** LOADs that map appended data (not in the original). */
  readonly newLoads: ProgramHeader[];
  /** Whether an original LOAD grew (a segment added by an earlier edit, extended). */
  readonly extended: boolean;
  /** Whether e_phoff changed. */
  readonly tableMoved: boolean;
  /** Whether e_phnum changed without the table moving. */
  readonly tableGrown: boolean;
}

/** The invariants of docs/design.md's ELF facts on the patched program headers, compared with the original's. */
export function layoutProblems(arch: Arch, original: ReadBack, patched: ReadBack): { problems: string[]; facts: LayoutFacts } {
  const problems: string[] = [];
  const before = original.image.programHeaders;
  const after = patched.image.programHeaders;
  const header = patched.image.header;
  const pageSize = machinePageSizeOf(arch);
  const loads = after.filter(isLoad);

  for (const ph of after) {
    if (ph.p_type === PT.PT_NULL || ph.p_type === PT.PT_GNU_STACK) continue;
    if (ph.p_offset + ph.p_filesz > patched.size)
      problems.push(`segment runs past the end of the file (size ${hex(patched.size)}): ${describePh(ph)}`);
  }
  for (const ph of loads) {
    if (ph.p_filesz > ph.p_memsz) problems.push(`PT_LOAD with p_filesz > p_memsz: ${describePh(ph)}`);
    if (ph.p_align > 1) {
      if ((ph.p_align & (ph.p_align - 1)) !== 0) problems.push(`PT_LOAD p_align is not a power of two: ${describePh(ph)}`);
      if (ph.p_vaddr % ph.p_align !== ph.p_offset % ph.p_align)
        problems.push(`PT_LOAD with p_vaddr ≢ p_offset (mod p_align): ${describePh(ph)}`);
    }
  }
  for (let i = 1; i < loads.length; i++) {
    const previous = loads[i - 1] as ProgramHeader;
    const current = loads[i] as ProgramHeader;
    if (current.p_vaddr < previous.p_vaddr)
      problems.push(`PT_LOADs not sorted by p_vaddr: ${describePh(previous)} before ${describePh(current)}`);
    if (current.p_vaddr < previous.p_vaddr + previous.p_memsz && previous.p_vaddr < current.p_vaddr + current.p_memsz) {
      problems.push(`PT_LOADs overlap: ${describePh(previous)} and ${describePh(current)}`);
    }
  }

  // Every original LOAD is still there, where it was.
  const same = (a: ProgramHeader, b: ProgramHeader): boolean =>
    a.p_offset === b.p_offset && a.p_vaddr === b.p_vaddr && a.p_align === b.p_align;
  let extended = false;
  for (const old of before.filter(isLoad)) {
    const now = loads.find((ph) => same(ph, old));
    if (now === undefined) {
      problems.push(`original PT_LOAD is gone: ${describePh(old)}`);
      continue;
    }
    if (now.p_filesz !== old.p_filesz || now.p_memsz !== old.p_memsz) {
      const endedFile = old.p_offset + old.p_filesz === original.size && old.p_filesz === old.p_memsz;
      if (!endedFile || now.p_filesz < old.p_filesz)
        problems.push(`original PT_LOAD changed size: ${describePh(old)} → ${describePh(now)}`);
      else extended = true;
    }
    if ((now.p_flags & ~PF_W) !== (old.p_flags & ~PF_W) || ((old.p_flags & PF_W) !== 0 && (now.p_flags & PF_W) === 0)) {
      problems.push(`original PT_LOAD changed flags ${hex(old.p_flags)} → ${hex(now.p_flags)}: ${describePh(now)}`);
    }
  }
  const newLoads = loads.filter((ph) => !before.some((old) => isLoad(old) && same(ph, old)));
  if (newLoads.length + (extended ? 1 : 0) > 1)
    problems.push(`more than one segment added or extended by one edit: ${newLoads.map(describePh).join('; ')}`);
  for (const ph of newLoads) {
    if (ph.p_align < pageSize) problems.push(`new PT_LOAD aligned below the ${arch} page size ${hex(pageSize)}: ${describePh(ph)}`);
    if (ph.p_offset < original.size) problems.push(`new PT_LOAD maps bytes of the original file: ${describePh(ph)}`);
    // A loader with pages of this size maps whole pages: the new segment must not share one with another.
    for (const other of loads) {
      if (other === ph) continue;
      const firstPage = Math.floor(ph.p_vaddr / pageSize);
      const lastPage = Math.floor((ph.p_vaddr + Math.max(ph.p_memsz, 1) - 1) / pageSize);
      const otherFirst = Math.floor(other.p_vaddr / pageSize);
      const otherLast = Math.floor((other.p_vaddr + Math.max(other.p_memsz, 1) - 1) / pageSize);
      if (firstPage <= otherLast && otherFirst <= lastPage) {
        problems.push(`new PT_LOAD shares a ${hex(pageSize)} page with another: ${describePh(ph)} and ${describePh(other)}`);
      }
    }
  }

  // The program header table.
  const tableSize = header.phnum * header.e_phentsize;
  const tableMoved = header.e_phoff !== original.image.header.e_phoff;
  const tableGrown = !tableMoved && header.phnum !== original.image.header.phnum;
  const isExecutable = header.e_type === ET.ET_EXEC || before.some((ph) => ph.p_type === PT.PT_INTERP);
  const phdrEntry = after.find((ph) => ph.p_type === PT.PT_PHDR);
  if (tableMoved && isExecutable) {
    // The kernel before 5.18 (first PT_LOAD's p_vaddr - p_offset + e_phoff) and qemu-user (lowest
    // PT_LOAD's p_vaddr + e_phoff) tell the program where its table is without looking at PT_PHDR.
    const first = loads[0];
    const lowest = loads.reduce<ProgramHeader | undefined>(
      (low, ph) => (low === undefined || ph.p_vaddr < low.p_vaddr ? ph : low),
      undefined,
    );
    const kernel = first === undefined ? null : first.p_vaddr - first.p_offset + header.e_phoff;
    const qemu = lowest === undefined ? null : lowest.p_vaddr + header.e_phoff;
    if (phdrEntry === undefined || kernel !== phdrEntry.p_vaddr || qemu !== phdrEntry.p_vaddr) {
      problems.push(
        `an executable's program header table moved to ${hex(header.e_phoff)}, but AT_PHDR as the kernel (${hex(kernel ?? -1)}) or qemu (${hex(qemu ?? -1)}) computes it is not where PT_PHDR maps it (${phdrEntry === undefined ? 'no PT_PHDR' : hex(phdrEntry.p_vaddr)})`,
      );
    }
  }
  const phdrIndex = after.findIndex((ph) => ph.p_type === PT.PT_PHDR);
  const firstLoad = after.findIndex(isLoad);
  if (phdrIndex >= 0) {
    const phdr = after[phdrIndex] as ProgramHeader;
    if (after.filter((ph) => ph.p_type === PT.PT_PHDR).length > 1) problems.push('more than one PT_PHDR');
    if (firstLoad >= 0 && phdrIndex > firstLoad)
      problems.push(`PT_PHDR (entry ${phdrIndex}) comes after the first PT_LOAD (entry ${firstLoad})`);
    if (phdr.p_offset !== header.e_phoff || phdr.p_filesz !== tableSize) {
      problems.push(`PT_PHDR does not describe the table (e_phoff ${hex(header.e_phoff)}, ${hex(tableSize)} bytes): ${describePh(phdr)}`);
    }
    if (mappingLoad(after, phdr.p_offset, phdr.p_filesz, phdr.p_vaddr) === undefined)
      problems.push(`PT_PHDR is not mapped by a PT_LOAD: ${describePh(phdr)}`);
  }
  if (tableMoved && phdrIndex !== 0)
    problems.push(`the program header table moved but entry 0 is not a PT_PHDR for it (found at ${phdrIndex})`);
  if (phdrIndex < 0) {
    // glibc takes the table from the first LOAD whose page-rounded file range covers e_phoff (docs/design.md, The ELF facts the edits rely on).
    for (const page of RUNTIME_PAGE_SIZES[arch]) {
      const covering = loads.find((ph) => {
        const start = Math.floor(ph.p_offset / page) * page;
        const end = Math.ceil((ph.p_offset + ph.p_filesz) / page) * page;
        return start <= header.e_phoff && header.e_phoff + tableSize <= end;
      });
      const originalCovered = original.image.programHeaders.some((ph) => isLoad(ph) && ph.p_offset <= original.image.header.e_phoff);
      if (covering === undefined) {
        if (originalCovered && (tableMoved || tableGrown))
          problems.push(`no PT_LOAD covers the program header table at ${hex(header.e_phoff)} (page ${hex(page)})`);
      } else if (header.e_phoff < covering.p_offset || header.e_phoff + tableSize > covering.p_offset + covering.p_filesz) {
        problems.push(
          `without PT_PHDR, glibc (page ${hex(page)}) finds the table in the page tail of ${describePh(covering)}, outside its file bytes`,
        );
      }
    }
  }

  // Segments that lay inside a LOAD still do, at consistent addresses; PT_DYNAMIC stays writable.
  for (const ph of after) {
    if (
      ph.p_type === PT.PT_LOAD ||
      ph.p_type === PT.PT_NULL ||
      ph.p_type === PT.PT_GNU_STACK ||
      ph.p_type === PT.PT_GNU_RELRO ||
      ph.p_filesz === 0
    )
      continue;
    const old = before.find((o) => o.p_type === ph.p_type && (o.p_offset === ph.p_offset || o.p_filesz === ph.p_filesz));
    const wasMapped = old === undefined || mappingLoad(before, old.p_offset, old.p_filesz, old.p_vaddr) !== undefined;
    const load = mappingLoad(after, ph.p_offset, ph.p_filesz, ph.p_vaddr);
    if (wasMapped && load === undefined) problems.push(`segment not inside a PT_LOAD at a consistent address: ${describePh(ph)}`);
    if (ph.p_type === PT.PT_DYNAMIC && load !== undefined && old !== undefined) {
      const oldLoad = mappingLoad(before, old.p_offset, old.p_filesz, old.p_vaddr);
      if (oldLoad !== undefined && (oldLoad.p_flags & PF_W) !== 0 && (load.p_flags & PF_W) === 0) {
        problems.push(`PT_DYNAMIC moved into a read-only PT_LOAD (ld.so writes DT_DEBUG there): ${describePh(ph)} in ${describePh(load)}`);
      }
    }
  }
  return { problems, facts: { newLoads, extended, tableMoved, tableGrown } };
}

/** Sections that tools use to find what moved still describe it (readelf, strip, debuggers). */
function sectionProblems(original: ReadBack, patched: ReadBack, dynamicTable: { strtab: number | null; strsz: number | null }): string[] {
  const problems: string[] = [];
  if (original.sections.length !== patched.sections.length) {
    problems.push(`section count changed: ${original.sections.length} → ${patched.sections.length}`);
    return problems;
  }
  const before = original.image.programHeaders;
  const after = patched.image.programHeaders;
  patched.sections.forEach((section, i) => {
    const old = original.sections[i] as Section;
    if (section.name !== old.name || section.sh_type !== old.sh_type)
      problems.push(`section ${i} changed name or type: ${old.name} → ${section.name}`);
    if ((section.sh_flags & SHF_ALLOC) === 0 || section.sh_type === SHT.SHT_NOBITS || section.sh_size === 0) return;
    const wasMapped = mappingLoad(before, old.sh_offset, old.sh_size, old.sh_addr) !== undefined;
    if (wasMapped && mappingLoad(after, section.sh_offset, section.sh_size, section.sh_addr) === undefined) {
      problems.push(
        `section ${byteStringToText(section.name)} (offset ${hex(section.sh_offset)} addr ${hex(section.sh_addr)} size ${hex(section.sh_size)}) is not mapped where it says`,
      );
    }
  });
  const strtabBefore = original.image.dynamic?.entries.find((e) => e.d_tag === DT.DT_STRTAB)?.d_val;
  const strszBefore = original.image.dynamic?.entries.find((e) => e.d_tag === DT.DT_STRSZ)?.d_val;
  const dynstrIndex = original.sections.findIndex(
    (s) => s.sh_type === SHT.SHT_STRTAB && s.sh_addr === strtabBefore && s.sh_size === strszBefore,
  );
  const dynstr = patched.sections[dynstrIndex];
  if (dynstr !== undefined && (dynstr.sh_addr !== dynamicTable.strtab || dynstr.sh_size !== dynamicTable.strsz)) {
    problems.push(
      `.dynstr section header (addr ${hex(dynstr.sh_addr)} size ${dynstr.sh_size}) disagrees with DT_STRTAB ${hex(dynamicTable.strtab ?? -1)} / DT_STRSZ ${String(dynamicTable.strsz)}`,
    );
  }
  const dynamicPh = patched.image.programHeaders.find((ph) => ph.p_type === PT.PT_DYNAMIC);
  const dynamicBefore = original.image.programHeaders.find((ph) => ph.p_type === PT.PT_DYNAMIC);
  const dynamicIndex = original.sections.findIndex((s) => s.sh_type === SHT.SHT_DYNAMIC);
  const oldDynamic = original.sections[dynamicIndex];
  const dynamicSection = patched.sections[dynamicIndex];
  if (
    dynamicSection !== undefined &&
    oldDynamic !== undefined &&
    dynamicPh !== undefined &&
    dynamicBefore !== undefined &&
    oldDynamic.sh_offset === dynamicBefore.p_offset &&
    (dynamicSection.sh_offset !== dynamicPh.p_offset || dynamicSection.sh_addr !== dynamicPh.p_vaddr)
  ) {
    problems.push(`.dynamic section header (offset ${hex(dynamicSection.sh_offset)}) disagrees with PT_DYNAMIC (${describePh(dynamicPh)})`);
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// Loading

export type LoadCheck =
  /** No loader for this architecture here (arm, ppc64): static checks only. */
  | { readonly kind: 'none' }
  /** A library: `ld.so --list` must resolve everything (and these names in particular). */
  | { readonly kind: 'list'; readonly libraryPath?: string | null; readonly resolves?: readonly string[] }
  /** A program: it must run and print `output`. */
  | { readonly kind: 'run'; readonly libraryPath?: string | null; readonly output: string }
  /**
   * A dynamic loader, run with `program`, which must print `output` — or, where the edit gave the
   * loader a tag glibc's start-up asserts it does not have (DT_RUNPATH, DT_RPATH), stop with that
   * assertion: the loader was mapped and got as far as reading the edited dynamic array.
   */
  | {
      readonly kind: 'loader';
      readonly program: string;
      readonly libraryPath?: string | null;
      readonly output: string;
      readonly refusal?: string;
    };

/** The compiled dlopen probe of an architecture (dlopen RTLD_NOW: every symbol bound, constructors run). */
function dlopenProbe(arch: Arch): string {
  return fixture(arch === 'x86_64' ? 'compiled/x86_64/dlopen-probe' : 'compiled/aarch64-64k/dlopen-probe').path;
}

function dlopen(file: string, arch: Arch, libraryPath: string | null | undefined): Promise<ExecResult> {
  return runOn(arch, dlopenProbe(arch), [file], programVars(libraryPath));
}

const dlopenCache = new Map<string, Promise<boolean>>();

/**
 * Loads or runs `file` as the check says; returns what went wrong. For a library, the dlopen probe is
 * demanded only when `original` passes it too (a second libc in one process, for one, does not).
 */
export async function loadProblems(file: string, arch: Arch, load: LoadCheck, original?: string): Promise<string[]> {
  switch (load.kind) {
    case 'none':
      return [];
    case 'list': {
      const problems = listProblems(file, await listDependencies(file, arch, load.libraryPath), load.resolves ?? []);
      if (original !== undefined) {
        const key = `${original}\0${load.libraryPath ?? ''}`;
        const originalLoads = remembered(dlopenCache, key, () => dlopen(original, arch, load.libraryPath).then((r) => r.code === 0));
        if (await originalLoads) {
          const result = await dlopen(file, arch, load.libraryPath);
          if (result.code !== 0 || result.stdout.trim() !== 'dlopen-probe: 1 loaded')
            problems.push(describeExec(`dlopen(${file}, RTLD_NOW) failed`, result));
        }
      }
      return problems;
    }
    case 'run': {
      const result = await runOn(arch, file, [], programVars(load.libraryPath));
      if (result.code !== 0 || result.stdout.trim() !== load.output) {
        return [describeExec(`${file} should print ${JSON.stringify(load.output)}`, result)];
      }
      return [];
    }
    case 'loader': {
      const result = await runOn(arch, file, [load.program], programVars(load.libraryPath));
      if (load.refusal !== undefined) {
        if (result.code === 0 || result.signal !== null || !result.stderr.includes(load.refusal)) {
          return [describeExec(`${file} ${load.program} (as the loader) should stop with ${JSON.stringify(load.refusal)}`, result)];
        }
        return [];
      }
      if (result.code !== 0 || result.stdout.trim() !== load.output) {
        return [describeExec(`${file} ${load.program} (as the loader) should print ${JSON.stringify(load.output)}`, result)];
      }
      return [];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The ladder

export interface Expected {
  /** null: no DT_RUNPATH; undefined: not checked. */
  readonly runpath?: string | null;
  readonly rpath?: string | null;
  readonly needed?: readonly string[];
  /** DT_NEEDED renames that the version needs must follow (readelf -V File:). */
  readonly renamed?: Readonly<Record<string, string>>;
}

export interface VerifyInput {
  readonly original: string;
  readonly patched: string;
  readonly arch: Arch;
  readonly expect: Expected;
  readonly load: LoadCheck;
  /** The CLI arguments (without the file) of the edit: applied again, it must be a byte-identical noop. */
  readonly again: readonly string[];
  /** Strings removed by the edit that must not survive anywhere in the file (Nix scans for store paths). */
  readonly gone?: readonly string[];
  /** Skip strip (the matrix strips real libraries once per fixture, not once per operation). */
  readonly strip?: boolean;
  /** Problems the caller already found (a wrong tier…), reported together with the ladder's. */
  readonly problems?: readonly string[];
}

export interface VerifyReport extends LayoutFacts {
  /** Checks that could not be demanded because the tool refuses the original too. */
  readonly notApplicable: string[];
}

/** Runs the whole ladder; fails the test with every problem found, or returns what it saw. */
export async function verifyPatched(input: VerifyInput): Promise<VerifyReport> {
  const { problems, report } = await collectProblems(input);
  expect(problems, `${input.patched} (edited copy of ${input.original})`).toEqual([]);
  return report;
}

async function collectProblems(input: VerifyInput): Promise<{ problems: string[]; report: VerifyReport }> {
  const { original, patched, arch, expect: wanted } = input;
  const problems: string[] = [...(input.problems ?? [])];
  const notApplicable: string[] = [];

  // 1. Our reader.
  const before = await readBack(original);
  let after: ReadBack;
  try {
    after = await readBack(patched);
  } catch (error) {
    return {
      problems: [...problems, `our reader cannot read the result: ${String(error)}`],
      report: { newLoads: [], extended: false, tableMoved: false, tableGrown: false, notApplicable },
    };
  }
  const s = after.summary;
  const o = before.summary;
  if (wanted.runpath !== undefined && text(s.runpath) !== wanted.runpath)
    problems.push(`reader: DT_RUNPATH is ${JSON.stringify(text(s.runpath))}, expected ${JSON.stringify(wanted.runpath)}`);
  if (wanted.rpath !== undefined && text(s.rpath) !== wanted.rpath)
    problems.push(`reader: DT_RPATH is ${JSON.stringify(text(s.rpath))}, expected ${JSON.stringify(wanted.rpath)}`);
  if (wanted.needed !== undefined && JSON.stringify(s.needed.map(byteStringToText)) !== JSON.stringify(wanted.needed)) {
    problems.push(`reader: DT_NEEDED is ${JSON.stringify(s.needed.map(byteStringToText))}, expected ${JSON.stringify(wanted.needed)}`);
  }
  for (const field of ['class', 'byteOrder', 'machine', 'type', 'interpreter', 'soname', 'flags', 'flags1'] as const) {
    if (JSON.stringify(s[field]) !== JSON.stringify(o[field]))
      problems.push(`reader: ${field} changed: ${JSON.stringify(o[field])} → ${JSON.stringify(s[field])}`);
  }
  const liveTags = (r: ReadBack): number[] => (r.image.dynamic?.entries ?? []).map((e) => e.d_tag);
  const edited: readonly number[] = [DT.DT_NEEDED, DT.DT_RPATH, DT.DT_RUNPATH, DT.DT_STRTAB, DT.DT_STRSZ];
  const untouched = (tags: number[]): number[] => tags.filter((t) => !edited.includes(t));
  if (JSON.stringify(untouched(liveTags(after))) !== JSON.stringify(untouched(liveTags(before)))) {
    problems.push('reader: dynamic tags other than DT_NEEDED/DT_RPATH/DT_RUNPATH changed or were reordered');
  }
  for (const entry of before.image.dynamic?.entries ?? []) {
    if (edited.includes(entry.d_tag) || entry.d_tag === DT.DT_SONAME) continue;
    const same = (after.image.dynamic?.entries ?? []).find((e) => e.d_tag === entry.d_tag);
    if (same !== undefined && same.d_val === entry.d_val) continue;
    // A section after the program header table may move out of its way: then its tag follows it,
    // and what it points at must be the same bytes.
    const moved =
      same !== undefined && RELOCATABLE_TAGS.includes(entry.d_tag)
        ? await sameSectionBytes(original, before, entry.d_val, patched, after, same.d_val)
        : null;
    if (moved !== true)
      problems.push(
        `reader: dynamic entry ${hex(entry.d_tag)} = ${hex(entry.d_val)} changed or went missing${moved === false ? ' (and the bytes it points at differ)' : ''}`,
      );
  }

  // 2. readelf.
  const readelfBefore = await readelfAll(original, true);
  const readelfAfter = await readelfAll(patched, false);
  if (readelfAfter.code !== 0) problems.push(describeExec('readelf failed on the result', readelfAfter));
  const newWarnings = diffLines(readelfBefore.stderr.replaceAll(original, '<file>'), readelfAfter.stderr.replaceAll(patched, '<file>'));
  if (newWarnings.length > 0) problems.push(`readelf warns about the result:\n${newWarnings.join('\n')}`);
  const partsBefore = splitReadelf(readelfBefore.stdout);
  const partsAfter = splitReadelf(readelfAfter.stdout);
  const dynamicRowsAfter = parseDynamicRows(partsAfter.dynamic);
  const lastNumber = (tag: string): number | null => {
    const row = dynamicRowsAfter.filter((r) => r.tag === tag).at(-1);
    return row === undefined ? null : rowNumber(row, patched);
  };
  const dyn = { ...dynamicFacts(dynamicRowsAfter), strtab: lastNumber('STRTAB'), strsz: lastNumber('STRSZ') };
  if (wanted.runpath !== undefined && dyn.runpath !== wanted.runpath)
    problems.push(`readelf: RUNPATH is ${JSON.stringify(dyn.runpath)}, expected ${JSON.stringify(wanted.runpath)}`);
  if (wanted.rpath !== undefined && dyn.rpath !== wanted.rpath)
    problems.push(`readelf: RPATH is ${JSON.stringify(dyn.rpath)}, expected ${JSON.stringify(wanted.rpath)}`);
  if (wanted.needed !== undefined && JSON.stringify(dyn.needed) !== JSON.stringify(wanted.needed)) {
    problems.push(`readelf: NEEDED is ${JSON.stringify(dyn.needed)}, expected ${JSON.stringify(wanted.needed)}`);
  }
  if (dyn.soname !== text(o.soname))
    problems.push(`readelf: SONAME is ${JSON.stringify(dyn.soname)}, expected ${JSON.stringify(text(o.soname))}`);
  let versionsBefore = versionLines(partsBefore.versions);
  for (const [from, to] of Object.entries(wanted.renamed ?? {})) {
    versionsBefore = versionsBefore.map((line) => line.replace(new RegExp(`File: ${escapeRegExp(from)}(\\s)`), `File: ${to}$1`));
  }
  const versionsAfter = versionLines(partsAfter.versions);
  if (JSON.stringify(versionsAfter) !== JSON.stringify(versionsBefore)) {
    problems.push(`readelf -V changed:\n${diffLines(versionsBefore.join('\n'), versionsAfter.join('\n')).slice(0, 20).join('\n')}`);
  }
  const symbolsBefore = dynamicSymbolLines(partsBefore.symbols);
  const symbolsAfter = dynamicSymbolLines(partsAfter.symbols);
  if (symbolsAfter.length !== symbolsBefore.length || symbolsAfter.some((line, i) => line !== symbolsBefore[i])) {
    const changed = symbolsAfter.filter((line, i) => line !== symbolsBefore[i]).slice(0, 10);
    problems.push(`readelf --dyn-syms changed (${symbolsBefore.length} → ${symbolsAfter.length} symbols):\n${changed.join('\n')}`);
  }
  problems.push(...sectionProblems(before, after, dyn));

  // 3. patchelf, where it can read the original at all.
  const patchelf = requireTool('patchelf');
  if (await toolReadsOriginal(`patchelf ${original}`, () => execTool(patchelf, ['--print-rpath', original]))) {
    // One run (patchelf reads the whole file): the search path on the first line, then the needed list.
    const printed = await execTool(patchelf, ['--print-rpath', '--print-needed', patched]);
    if (printed.code !== 0) problems.push(describeExec('patchelf --print-rpath --print-needed failed on the result', printed));
    else {
      const [rpathLine = '', ...neededLines] = printed.stdout.replace(/\n$/, '').split('\n');
      // patchelf prints DT_RUNPATH when there is one, else DT_RPATH.
      const searchPath = wanted.runpath !== undefined && wanted.rpath !== undefined ? (wanted.runpath ?? wanted.rpath ?? '') : undefined;
      if (searchPath !== undefined && rpathLine !== searchPath) {
        problems.push(`patchelf --print-rpath says ${JSON.stringify(rpathLine)}, expected ${JSON.stringify(searchPath)}`);
      }
      const neededList = neededLines.filter((line) => line !== '');
      if (wanted.needed !== undefined && JSON.stringify(neededList) !== JSON.stringify(wanted.needed)) {
        problems.push(`patchelf --print-needed says ${JSON.stringify(neededList)}, expected ${JSON.stringify(wanted.needed)}`);
      }
    }
  } else notApplicable.push('patchelf (cannot read the original)');

  // 4. Program headers.
  const layout = layoutProblems(arch, before, after);
  problems.push(...layout.problems);

  // 5. eu-elflint: nothing the original did not already have.
  const lintBefore = await originalElflint(original);
  const lintAfter = await elflintLines(patched);
  // Every new complaint counts, the text relocation one included: eu-elflint flags a relocation when
  // r_offset + its symbol's st_size reaches a read-only segment, so an appended segment placed close
  // after the GOT draws it, and the layout leaves an address gap so that it does not.
  const newLint = [...lintAfter].filter((line) => !lintBefore.has(line.replaceAll(patched, '<file>')));
  if (newLint.length > 0) problems.push(`eu-elflint --gnu-ld reports new problems:\n${newLint.slice(0, 20).join('\n')}`);

  // Dead strings.
  if (input.gone !== undefined && input.gone.length > 0) {
    const [originalBytes, patchedBytes] = await Promise.all([bytesOf(original), bytesOf(patched)]);
    for (const gone of input.gone) {
      const was = countOccurrences(originalBytes, gone);
      const now = countOccurrences(patchedBytes, gone);
      if (was === 0) problems.push(`test error: ${JSON.stringify(gone)} is not in the original`);
      else if (now >= was || (was === 1 && now !== 0))
        problems.push(`removed string ${JSON.stringify(gone)} is still in the file (${was} → ${now} occurrences)`);
    }
  }

  // 6. It loads / runs.
  problems.push(...(await loadProblems(patched, arch, input.load, original)));

  // 7. The same edit again, on the result itself: a noop that writes nothing.
  const digestBefore = await digestOf(patched);
  const statBefore = await stat(patched);
  const [record] = await cliEdit(input.again, [patched]);
  if (record?.error !== undefined) problems.push(`applying the edit again failed: ${record.error.kind}: ${record.error.message}`);
  else if (record?.tier !== 'noop') problems.push(`applying the edit again took tier ${String(record?.tier)}, expected noop`);
  const statAfter = await stat(patched);
  if (statAfter.mtimeMs !== statBefore.mtimeMs || statAfter.size !== statBefore.size)
    problems.push('applying the edit again touched the file (mtime or size changed)');
  if ((await digestOf(patched)) !== digestBefore) problems.push('applying the edit again changed bytes');

  // 8. strip, where strip takes the original.
  if (input.strip !== false) {
    const strip = crossTool(arch, 'strip');
    const readsOriginal = await toolReadsOriginal(`strip ${original}`, async () => {
      const probe = await makeTempDir('strip-probe');
      try {
        return await execTool(strip, ['-o', join(probe, 'original'), original]);
      } finally {
        await rm(probe, { recursive: true, force: true });
      }
    });
    if (readsOriginal) {
      const stripped = `${patched}.stripped`;
      const result = await execTool(strip, ['-o', stripped, patched]);
      if (result.code !== 0) problems.push(describeExec('strip failed on the result', result));
      else {
        try {
          const back = await readBack(stripped);
          // strip re-lays the file out: its segments must not come to share a page they did not share.
          for (const page of RUNTIME_PAGE_SIZES[arch]) {
            const before = sharedPages(after, page);
            const added = [...sharedPages(back, page)].filter(([pair]) => !before.has(pair)).map(([, described]) => described);
            if (added.length === 0) continue;
            // binutils strip re-lays out a segment that holds a moved program header table (README,
            // "Known limitations"): recorded, and the matrix checks the set of such files exactly.
            if (layout.facts.tableMoved) stripAfterMovedTable.add(original);
            else problems.push(`after strip: PT_LOADs now share a ${hex(page)} page: ${added.join('; ')}`);
          }
          if (wanted.runpath !== undefined && text(back.summary.runpath) !== wanted.runpath)
            problems.push(`after strip: DT_RUNPATH is ${JSON.stringify(text(back.summary.runpath))}`);
          if (wanted.rpath !== undefined && text(back.summary.rpath) !== wanted.rpath)
            problems.push(`after strip: DT_RPATH is ${JSON.stringify(text(back.summary.rpath))}`);
          if (wanted.needed !== undefined && JSON.stringify(back.summary.needed.map(byteStringToText)) !== JSON.stringify(wanted.needed)) {
            problems.push(`after strip: DT_NEEDED is ${JSON.stringify(back.summary.needed.map(byteStringToText))}`);
          }
        } catch (error) {
          problems.push(`after strip: our reader fails: ${String(error)}`);
        }
        problems.push(...(await loadProblems(stripped, arch, input.load, original)).map((p) => `after strip: ${p}`));
      }
      await rm(stripped, { force: true });
    } else notApplicable.push('strip (cannot read the original)');
  }
  return { problems, report: { ...layout.facts, notApplicable } };
}

/** Lines of `after` that `before` does not have (as a multiset). */
export function diffLines(before: string, after: string): string[] {
  const counts = new Map<string, number>();
  for (const line of before.split('\n')) if (line.trim() !== '') counts.set(line, (counts.get(line) ?? 0) + 1);
  const extra: string[] = [];
  for (const line of after.split('\n')) {
    if (line.trim() === '') continue;
    const left = counts.get(line) ?? 0;
    if (left > 0) counts.set(line, left - 1);
    else extra.push(line);
  }
  return extra;
}
