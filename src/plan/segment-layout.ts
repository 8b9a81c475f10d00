// Mapping appended data, step two: the region laid out around the blocks the edit appends, on the
// segment segment-choice.ts chose: where each block lands, what moves out of the program header table's
// way, the table at each step. append-writes.ts makes the writes from that record.

import { PF_R, PF_W, type ProgramHeader, PT } from '../elf/elf.js';
import type { EditFacts } from './edit-facts.js';
import { AppendedRegion } from './region.js';
import type { ExtendedSegment, NewSegment, SegmentChoice, TableStrategy } from './segment-choice.js';

/** A block of bytes the edit appends (a moved table, say): the layout says where it lands. */
export interface BlockRequest {
  readonly size: number;
  readonly align: number;
  /** The type of the program header that maps exactly this block (PT_DYNAMIC for the dynamic array): it follows the block. */
  readonly mappedBy?: number;
  /** Whether the loader writes into it (ld.so writes DT_DEBUG in a dynamic array): the segment is then writable. */
  readonly writable: boolean;
}

/** A file offset and the address it is mapped at. */
export interface Place {
  readonly offset: number;
  readonly vaddr: number;
}

export interface MovedRange {
  readonly from: number;
  readonly fromVaddr: number;
  readonly to: number;
  readonly size: number;
  /** to-vaddr minus from-vaddr. */
  readonly vaddrDelta: number;
  /** The bytes copied from `from` to `to`. */
  readonly bytes: Uint8Array;
}

export interface TableLayout {
  readonly programHeaders: ProgramHeader[];
  /** Where the table is written: in place at e_phoff, or in the region. */
  readonly tableOffset: number;
}

/** The appended region, laid out: what goes where, and the program header table that maps it. */
export interface RegionLayout {
  readonly strategy: TableStrategy;
  /** The file offset of the region's first byte, and the end of its last (an interim table included). */
  readonly start: number;
  readonly end: number;
  /** Where each block asked for lands, in the order asked. */
  readonly blocks: readonly Place[];
  /** What moved out of the program header table's way (grow-in-place, grow-after-move). */
  readonly moved: readonly MovedRange[];
  /** The program header table the edit leaves: at e_phoff, or in the region (move-table). */
  readonly table: TableLayout;
  /**
   * grow-after-move: the table as it stands in the region while the tags switch. It is the last thing
   * in the region, outside the final segment, and cut off the file once the grown table is live.
   */
  readonly interim: TableLayout | null;
  /** The file's size once the edit is done (the region's end, less an interim table). */
  readonly fileEnd: number;
}

/** Lays out the region around `blocks` on the chosen segment. */
export function layOutRegion(facts: EditFacts, segment: SegmentChoice, blocks: readonly BlockRequest[]): RegionLayout {
  return segment.strategy === 'extend' ? extendedRegion(facts, segment, blocks) : newSegmentRegion(facts, segment, blocks);
}

function segmentFlags(blocks: readonly BlockRequest[]): number {
  return PF_R | (blocks.some((block) => block.writable) ? PF_W : 0);
}

/** The program headers with each one that maps a block moved onto it (a moved dynamic array's PT_DYNAMIC). */
function followBlocks(programHeaders: ProgramHeader[], blocks: readonly BlockRequest[], places: readonly Place[]): ProgramHeader[] {
  let followed = programHeaders;
  blocks.forEach((block, i) => {
    const place = places[i];
    if (block.mappedBy === undefined || place === undefined) return;
    followed = followed.map((ph) =>
      ph.p_type === block.mappedBy
        ? { ...ph, p_offset: place.offset, p_vaddr: place.vaddr, p_paddr: place.vaddr, p_filesz: block.size, p_memsz: block.size }
        : ph,
    );
  });
  return followed;
}

function extendedRegion(facts: EditFacts, segment: ExtendedSegment, blocks: readonly BlockRequest[]): RegionLayout {
  const extended = facts.programHeaders[segment.index] as ProgramHeader;
  const region = new AppendedRegion(facts.fileSize);
  const places = blocks.map((block): Place => {
    const offset = region.reserve(block.size, block.align);
    return { offset, vaddr: extended.p_vaddr + (offset - extended.p_offset) };
  });
  const programHeaders = facts.programHeaders.map((ph) => ({ ...ph }));
  const size = region.endOffset - extended.p_offset;
  programHeaders[segment.index] = { ...extended, p_filesz: size, p_memsz: size, p_flags: extended.p_flags | segmentFlags(blocks) };
  return {
    strategy: 'extend',
    start: region.start,
    end: region.endOffset,
    blocks: places,
    moved: [],
    table: { programHeaders: followBlocks(programHeaders, blocks, places), tableOffset: facts.header.e_phoff },
    interim: null,
    fileEnd: region.endOffset,
  };
}

/**
 * The region of a new segment: the ranges the table grows over first, then a table moved for good,
 * the blocks, and last an interim table. The program headers: every one inside a moved range follows
 * it, and the new PT_LOAD maps the region (less an interim table, in the table the edit leaves).
 */
function newSegmentRegion(facts: EditFacts, segment: NewSegment, blocks: readonly BlockRequest[]): RegionLayout {
  const { header, programHeaders, codec } = facts;
  const entrySize = header.e_phentsize;
  const region = new AppendedRegion(segment.start);
  const vaddrOf = (offset: number): number => segment.vaddr + (offset - region.start);
  const moved = segment.grow.map((range): MovedRange => {
    const to = region.reserve(range.bytes.length, 16);
    const size = range.bytes.length;
    return { from: range.offset, fromVaddr: range.vaddr, to, size, vaddrDelta: vaddrOf(to) - range.vaddr, bytes: range.bytes };
  });
  const hasPhdr = programHeaders.some((ph) => ph.p_type === PT.PT_PHDR);
  const movedCount = programHeaders.length + 1 + (hasPhdr ? 0 : 1);
  const reserveTable = (): number => region.reserve(movedCount * entrySize, codec.wordSize);
  // A table moved for good goes first, before the tables copied after it: binutils strip re-lays out
  // a segment that holds a program header table, and with the table last it garbled the .dynstr of
  // npm's libvips-cpp.so (test/rewrite-matrix.test.ts).
  const movedTableAt = segment.strategy === 'move-table' ? reserveTable() : -1;
  const places = blocks.map((block): Place => {
    const offset = region.reserve(block.size, block.align);
    return { offset, vaddr: vaddrOf(offset) };
  });
  // An interim table goes last, outside the final segment: it is cut off the end once dead.
  const dataEnd = region.endOffset;
  const tableAt = segment.strategy === 'grow-after-move' ? reserveTable() : movedTableAt;
  const loadUpTo = (end: number): ProgramHeader => ({
    p_type: PT.PT_LOAD,
    p_flags: segmentFlags(blocks),
    p_offset: region.start,
    p_vaddr: segment.vaddr,
    p_paddr: segment.vaddr,
    p_filesz: end - region.start,
    p_memsz: end - region.start,
    p_align: segment.align,
  });
  const load = loadUpTo(region.endOffset);
  const shifted = programHeaders.map((ph) => shiftIntoMoved(ph, moved));
  const grown = (finalLoad: ProgramHeader): ProgramHeader[] => [
    ...shifted.map((ph) => (ph.p_type === PT.PT_PHDR ? { ...ph, p_filesz: ph.p_filesz + entrySize, p_memsz: ph.p_memsz + entrySize } : ph)),
    finalLoad,
  ];
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
  const inPlace = (headers: ProgramHeader[]): TableLayout => ({ programHeaders: headers, tableOffset: header.e_phoff });
  const follow = (table: TableLayout): TableLayout => ({ ...table, programHeaders: followBlocks(table.programHeaders, blocks, places) });
  const laidOut = { strategy: segment.strategy, start: region.start, end: region.endOffset, blocks: places, moved };
  switch (segment.strategy) {
    case 'null-slot':
      return {
        ...laidOut,
        table: follow(inPlace([...shifted.filter((_, i) => i !== segment.nullSlot), load])),
        interim: null,
        fileEnd: region.endOffset,
      };
    case 'grow-in-place':
      return { ...laidOut, table: follow(inPlace(grown(load))), interim: null, fileEnd: region.endOffset };
    case 'grow-after-move':
      return { ...laidOut, table: follow(inPlace(grown(loadUpTo(dataEnd)))), interim: follow(movedTable()), fileEnd: dataEnd };
    case 'move-table':
      return { ...laidOut, table: follow(movedTable()), interim: null, fileEnd: region.endOffset };
  }
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
