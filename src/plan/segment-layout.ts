// Mapping appended data: extend the segment a previous edit appended, or add one PT_LOAD, finding a
// program header slot without moving anything the loader or the kernel finds by position (docs/design.md: the ELF facts, and how a file is edited).

import type { ProgramHeader } from '../elf/codec.js';
import { ET, PF_R, PF_W, PF_X, PT, SHF_ALLOC, SHT, machinePageSize } from '../elf/constants.js';
import type { EditFacts, MovableRange } from './edit-facts.js';
import { needsFacts, needsRewrite, unsupported, type NoPlan, type NeedsRewrite, type Unsupported } from './plan.js';
import { AppendedRegion, alignUp } from './region.js';

/** What the appended data is mapped by. */
export interface SegmentLayout {
  readonly region: AppendedRegion;
  /** True when the region extends the segment that ends the file (data there grows contiguously). */
  readonly extendsSegment: boolean;
  /** The virtual address of a file offset inside the region. */
  vaddrOf(offset: number): number;
  /**
   * Completes the layout once every item is reserved: the new program header table and ELF header
   * fields, and where the table lives.
   */
  finish(options: { writable: boolean }): FinishedLayout;
  /** Reserves region space for the bytes that must move to make room (grown table strategy). */
  readonly moved: readonly MovedRange[];
}

export interface MovedRange {
  readonly from: number;
  readonly fromVaddr: number;
  readonly to: number;
  readonly size: number;
  /** to-vaddr minus from-vaddr. */
  readonly vaddrDelta: number;
}

/**
 * How the program header table gets its new entry:
 * - `extend`: none needed, the segment an earlier edit added grows;
 * - `null-slot`: a PT_NULL entry is reused;
 * - `grow-in-place`: the table grows over PT_INTERP/PT_NOTE bytes (copied away) or padding, written
 *   with the ELF header in one write;
 * - `grow-after-move`: the table grows over sections that dynamic tags point at (.dynsym, .gnu.hash,
 *   version tables). Those stay referenced until the tags switch, so the table first moves into the
 *   new segment (`interim`), the tags switch to the copies, and then the grown table is written in its
 *   old place and the ELF header points back at it. The table ends where tools expect it (binutils
 *   strip re-lays out a segment that holds a moved table), and the interim copy, last in the region
 *   and outside the final segment, is cut off the end of the file;
 * - `move-table`: the table moves into the new segment for good, with a PT_PHDR entry.
 */
export type TableStrategy = 'extend' | 'null-slot' | 'grow-in-place' | 'grow-after-move' | 'move-table';

export interface TableLayout {
  readonly programHeaders: ProgramHeader[];
  /** Where the table is written: in place at e_phoff, or in the region. */
  readonly tableOffset: number;
}

export interface FinishedLayout extends TableLayout {
  readonly strategy: TableStrategy;
  /**
   * grow-after-move: the table as it stands in the region while the tags switch. It is the last thing
   * in the region, outside the final segment, and cut off the file once the grown table is live.
   */
  readonly interim: TableLayout | null;
  /** The file's size once the edit is done (the region's end, less an interim table). */
  readonly fileEnd: number;
}

function isLoad(ph: ProgramHeader): boolean {
  return ph.p_type === PT.PT_LOAD;
}

/** The highest PT_LOAD, if it is one that appended data can simply extend. */
function extendableSegment(facts: EditFacts): number | null {
  let highest = -1;
  facts.programHeaders.forEach((ph, index) => {
    const current = facts.programHeaders[highest];
    if (isLoad(ph) && (current === undefined || ph.p_vaddr > current.p_vaddr)) highest = index;
  });
  const ph = facts.programHeaders[highest];
  if (ph === undefined) return null;
  const endsAtEof = ph.p_offset + ph.p_filesz === facts.fileSize;
  return endsAtEof && ph.p_filesz === ph.p_memsz && (ph.p_flags & PF_X) === 0 ? highest : null;
}

/**
 * Chooses how the region at the end of the file will be mapped, or says that only the whole-file
 * rewrite can (an executable's program header table that can neither grow where it is nor move to
 * where the kernel looks for it), or that no tier can (no room for a new segment). A new segment's
 * place needs the largest .dynsym size (NeedsFacts).
 */
export function layoutSegment(facts: EditFacts): SegmentLayout | NoPlan {
  const extend = extendableSegment(facts);
  if (extend !== null) return extendLayout(facts, extend);
  if (facts.largestSymbolSize === null) return needsFacts('dynamic-symbols');
  return newLoadLayout(facts, facts.largestSymbolSize);
}

function extendLayout(facts: EditFacts, index: number): SegmentLayout {
  const segment = facts.programHeaders[index] as ProgramHeader;
  const region = new AppendedRegion(facts.fileSize);
  return {
    region,
    extendsSegment: true,
    moved: [],
    vaddrOf: (offset) => segment.p_vaddr + (offset - segment.p_offset),
    finish: ({ writable }) => {
      const programHeaders = facts.programHeaders.map((ph) => ({ ...ph }));
      const size = region.endOffset - segment.p_offset;
      programHeaders[index] = { ...segment, p_filesz: size, p_memsz: size, p_flags: segment.p_flags | PF_R | (writable ? PF_W : 0) };
      return { programHeaders, tableOffset: facts.header.e_phoff, strategy: 'extend', interim: null, fileEnd: region.endOffset };
    },
  };
}

/** The largest hole an executable's moved table may leave in the file (a big .bss puts it far out). */
const MAX_IDENTITY_HOLE = 64 * 2 ** 20;

/**
 * Where the new segment starts in the file and in memory, and its alignment. It starts `reach` (the
 * largest st_size in .dynsym; for a table moved for good, plus what strip may move it down by:
 * strippedBelow) or more above every segment's end. A symbol's extent, st_value +
 * st_size, or a relocation's, r_offset + the size of its symbol, starts inside the image and so ends
 * below that: a copy relocation (which writes st_size bytes at r_offset) or a symbol whose size runs
 * past the end of its section never reaches into the new segment. eu-elflint checks exactly this: it
 * takes a relocation to modify every segment that r_offset + st_size reaches, and a read-only segment
 * placed right after the GOT would be "modified" by the GOT or PLT slot of any symbol longer than the
 * distance. The hole is never in the file (the address only): usually a few KiB, and as large as the
 * largest symbol (31 MB for libicudata's data blob), which glibc reserves PROT_NONE (it counts against
 * RLIMIT_AS); a bound from section sizes would reach hundreds of MiB on CUDA libraries.
 *
 * Normally the segment starts at the end of the file, with p_vaddr ≡ p_offset (mod page size): no
 * padding. When an executable's table moves, the kernel (before Linux 5.18) and qemu-user compute
 * AT_PHDR as the first PT_LOAD's p_vaddr - p_offset + e_phoff, so the new segment must map file offset
 * T at exactly that address: it starts where that identity puts it, `reach` above every segment,
 * leaving a hole in the file when the file is shorter than the memory image.
 */
function placeNewSegment(
  facts: EditFacts,
  reach: number,
  pageSize: number,
  executableTableMoves: boolean,
): { start: number; vaddr: number; align: number } | NeedsRewrite | Unsupported {
  const loads = facts.programHeaders.filter(isLoad);
  const highestEnd = Math.max(...loads.map((ph) => ph.p_vaddr + ph.p_memsz));
  const lowestFree = highestEnd + reach;
  if (!Number.isSafeInteger(lowestFree))
    return unsupported(
      `no room for a new segment below 2^53: the highest segment ends at 0x${highestEnd.toString(16)}, and it must start ${reach} bytes above (the largest dynamic symbol's size)`,
    );
  if (!executableTableMoves) {
    return { start: facts.fileSize, vaddr: alignUp(lowestFree, pageSize) + (facts.fileSize % pageSize), align: pageSize };
  }
  const first = loads.reduce((low, ph) => (ph.p_vaddr < low.p_vaddr ? ph : low));
  if (first.p_offset !== 0) {
    return needsRewrite(
      'needs one more program header; the table cannot grow in place, and an executable whose first PT_LOAD does not start at offset 0 cannot have it moved (the kernel finds it by position)',
    );
  }
  const delta = first.p_vaddr;
  const start = Math.max(alignUp(facts.fileSize, facts.codec.wordSize), alignUp(lowestFree, pageSize) - delta);
  if (start - facts.fileSize > MAX_IDENTITY_HOLE) {
    return needsRewrite(
      `needs one more program header; the table cannot grow in place, and moving it where the kernel looks for it would leave a hole of ${Math.round((start - facts.fileSize) / 2 ** 20)} MiB in the file (the memory image, with the largest dynamic symbol's size past it, is that much larger than the file)`,
    );
  }
  return { start, vaddr: delta + start, align: delta % pageSize === 0 ? pageSize : first.p_align };
}

/**
 * How far binutils strip may move a segment that holds the program header table down in memory.
 * strip lays such a segment out again, moved down in memory as far as it moves down in the file: by
 * the bytes it drops or packs before it, which lie past the last PT_LOAD's file bytes (non-allocated
 * sections, the section header table). It was 3,328 bytes for npm's libvips-cpp, whose table only
 * moves; less room above the other segments put the stripped segment into the last page of .bss.
 */
function strippedBelow(facts: EditFacts): number {
  const loadedEnd = Math.max(...facts.programHeaders.filter(isLoad).map((ph) => ph.p_offset + ph.p_filesz));
  return Math.max(0, facts.fileSize - loadedEnd);
}

function newLoadLayout(facts: EditFacts, reach: number): SegmentLayout | NeedsRewrite | Unsupported {
  const { header, programHeaders, codec } = facts;
  const pageSize = machinePageSize(header.e_machine);
  if (!programHeaders.some(isLoad)) return unsupported('no PT_LOAD segment to place new data after');
  const entrySize = header.e_phentsize;
  const nullSlot = programHeaders.findIndex((ph) => ph.p_type === PT.PT_NULL);
  // The single write of header and grown table needs the table right after the ELF header.
  const growNow = nullSlot >= 0 || header.e_phoff !== header.e_ehsize ? null : roomAfterTable(facts, entrySize, facts.movableRanges);
  const growLater =
    nullSlot >= 0 || growNow !== null ? null : roomAfterTable(facts, entrySize, [...facts.movableRanges, ...facts.relocatableSections]);
  const grow = growNow ?? growLater;
  const strategy: TableStrategy =
    nullSlot >= 0 ? 'null-slot' : growNow !== null ? 'grow-in-place' : growLater !== null ? 'grow-after-move' : 'move-table';
  const isSharedObject = header.e_type === ET.ET_DYN && !programHeaders.some((ph) => ph.p_type === PT.PT_INTERP);
  const tableMoves = strategy === 'move-table' || strategy === 'grow-after-move';
  const placed = placeNewSegment(
    facts,
    reach + (strategy === 'move-table' ? strippedBelow(facts) : 0),
    pageSize,
    tableMoves && !isSharedObject,
  );
  if ('kind' in placed) return placed;
  const region = new AppendedRegion(placed.start);
  const vaddr = placed.vaddr;
  const vaddrOf = (offset: number): number => vaddr + (offset - region.start);
  // A generous bound on where the new segment ends: the file size again past its start.
  if (codec.elfClass === 32 && vaddrOf(region.start + facts.fileSize) > 0xffffffff)
    return unsupported('no room for a new segment in a 32-bit address space');
  if (!Number.isSafeInteger(vaddrOf(region.start + facts.fileSize)))
    return unsupported('no room for a new segment below 2^53: the highest segment ends too high');
  if (programHeaders.length + 2 >= 0xffff) return unsupported('program header table is full (PN_XNUM)');
  const unmapped = (grow ?? []).find((range) => vaddrAtOffset(facts, range.offset) === null);
  if (unmapped !== undefined) return unsupported(`bytes at 0x${unmapped.offset.toString(16)} are not in any PT_LOAD`);

  const moved: MovedRange[] = (grow ?? []).map((range) => {
    const to = region.reserve(range.bytes.length, 16);
    region.fill(to, range.bytes);
    const fromVaddr = vaddrAtOffset(facts, range.offset) as number;
    return { from: range.offset, fromVaddr, to, size: range.bytes.length, vaddrDelta: vaddrOf(to) - fromVaddr };
  });
  const hasPhdr = programHeaders.some((ph) => ph.p_type === PT.PT_PHDR);
  const movedCount = programHeaders.length + 1 + (hasPhdr ? 0 : 1);
  const reserveTable = (): number => region.reserve(movedCount * entrySize, codec.wordSize);
  // A table moved for good goes first, before the tables copied after it: binutils strip re-lays out
  // a segment that holds a program header table, and with the table last it garbled the .dynstr of
  // npm's libvips-cpp.so (test/rewrite-matrix.test.ts).
  const movedTableAt = strategy === 'move-table' ? reserveTable() : -1;

  return {
    region,
    extendsSegment: false,
    moved,
    vaddrOf,
    finish: ({ writable }) => {
      // An interim table goes last, outside the final segment: it is cut off the end once dead.
      const dataEnd = region.endOffset;
      const tableAt = strategy === 'grow-after-move' ? reserveTable() : movedTableAt;
      const loadUpTo = (end: number): ProgramHeader => ({
        p_type: PT.PT_LOAD,
        p_flags: PF_R | (writable ? PF_W : 0),
        p_offset: region.start,
        p_vaddr: vaddr,
        p_paddr: vaddr,
        p_filesz: end - region.start,
        p_memsz: end - region.start,
        p_align: placed.align,
      });
      const load = loadUpTo(region.endOffset);
      const shifted = programHeaders.map((ph) => shiftIntoMoved(ph, moved));
      const grown = (finalLoad: ProgramHeader): TableLayout => ({
        programHeaders: [
          ...shifted.map((ph) =>
            ph.p_type === PT.PT_PHDR ? { ...ph, p_filesz: ph.p_filesz + entrySize, p_memsz: ph.p_memsz + entrySize } : ph,
          ),
          finalLoad,
        ],
        tableOffset: header.e_phoff,
      });
      // The table in the new segment; PT_PHDR (first, as the gABI asks) tells glibc where it is.
      const movedTable = (): TableLayout => {
        const tableVaddr = vaddrOf(tableAt);
        const tableSize = movedCount * entrySize;
        const phdr: ProgramHeader = {
          p_type: PT.PT_PHDR,
          p_flags: PF_R,
          p_offset: tableAt,
          p_vaddr: tableVaddr,
          p_paddr: tableVaddr,
          p_filesz: tableSize,
          p_memsz: tableSize,
          p_align: codec.wordSize,
        };
        return { programHeaders: [phdr, ...shifted.filter((ph) => ph.p_type !== PT.PT_PHDR), load], tableOffset: tableAt };
      };
      const fileEnd = region.endOffset;
      switch (strategy) {
        case 'null-slot':
          return {
            programHeaders: [...shifted.filter((_, i) => i !== nullSlot), load],
            tableOffset: header.e_phoff,
            strategy,
            interim: null,
            fileEnd,
          };
        case 'grow-in-place':
          return { ...grown(load), strategy, interim: null, fileEnd };
        case 'grow-after-move':
          return { ...grown(loadUpTo(dataEnd)), strategy, interim: movedTable(), fileEnd: dataEnd };
        default:
          return { ...movedTable(), strategy, interim: null, fileEnd };
      }
    },
  };
}

/** The address of a file offset, through the PT_LOAD that maps it; null where none does. */
function vaddrAtOffset(facts: EditFacts, offset: number): number | null {
  const load = facts.programHeaders.find((ph) => isLoad(ph) && offset >= ph.p_offset && offset < ph.p_offset + ph.p_filesz);
  return load === undefined ? null : load.p_vaddr + (offset - load.p_offset);
}

/** A program header whose range lies inside a moved range follows it. */
function shiftIntoMoved(ph: ProgramHeader, moved: readonly MovedRange[]): ProgramHeader {
  const range = moved.find((m) => ph.p_type !== PT.PT_LOAD && ph.p_offset >= m.from && ph.p_offset + ph.p_filesz <= m.from + m.size);
  if (range === undefined) return ph;
  return {
    ...ph,
    p_offset: ph.p_offset + (range.to - range.from),
    p_vaddr: ph.p_vaddr + range.vaddrDelta,
    p_paddr: ph.p_paddr + range.vaddrDelta,
  };
}

/**
 * Room for one more entry right after the table: every byte there must belong to one of `units`
 * (ranges that can be copied elsewhere, the headers and tags that point at them updated), or be zero
 * padding outside every section, all inside the PT_LOAD that maps the table. Returns the units to move.
 */
function roomAfterTable(facts: EditFacts, entrySize: number, units: readonly MovableRange[]): MovableRange[] | null {
  const { header, programHeaders, sections } = facts;
  const tableEnd = header.e_phoff + programHeaders.length * entrySize;
  const windowEnd = tableEnd + entrySize;
  const covering = programHeaders.find((ph) => isLoad(ph) && ph.p_offset <= header.e_phoff && windowEnd <= ph.p_offset + ph.p_filesz);
  if (covering === undefined) return null;
  const toMove = units.filter((range) => range.offset < windowEnd && range.offset + range.bytes.length > tableEnd);
  if (toMove.some((range) => range.offset < tableEnd)) return null;
  const inside = (offset: number, size: number): boolean =>
    toMove.some((r) => offset >= r.offset && offset + size <= r.offset + r.bytes.length);
  for (let offset = tableEnd; offset < windowEnd; offset++) {
    if (!inside(offset, 1) && facts.afterProgramHeaders[offset - tableEnd] !== 0) return null;
  }
  const overlapsWindow = (offset: number, size: number): boolean => offset < windowEnd && offset + size > tableEnd;
  const blocking = programHeaders.some(
    (ph) =>
      ph.p_type !== PT.PT_LOAD && ph.p_type !== PT.PT_PHDR && overlapsWindow(ph.p_offset, ph.p_filesz) && !inside(ph.p_offset, ph.p_filesz),
  );
  const sectionInWay = sections.some(
    (s) =>
      (s.sh_flags & SHF_ALLOC) !== 0 &&
      s.sh_size > 0 &&
      s.sh_type !== SHT.SHT_NOBITS &&
      overlapsWindow(s.sh_offset, s.sh_size) &&
      !inside(s.sh_offset, s.sh_size),
  );
  return blocking || sectionInWay ? null : toMove;
}
