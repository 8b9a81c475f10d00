// Mapping appended data, step one: the segment that maps it. Extend the segment a previous edit
// appended, or add one PT_LOAD, finding a program header slot without moving anything the loader or
// the kernel finds by position (docs/design.md: the ELF facts, and how a file is edited). The choice is
// a plain record; segment-layout.ts lays the region out on it.

import { ET, machinePageSize, PF_X, type ProgramHeader, PT, SHF_ALLOC, SHT } from '../elf/elf.js';
import type { EditFacts, MovableRange } from './edit-facts.js';
import { needsFacts, needsRewrite, unsupported, type NeedsRewrite, type NoPlan, type Unsupported } from './plan.js';
import { alignUp } from './region.js';

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

/** The segment an earlier edit appended, which ends the file: the region extends it. */
export interface ExtendedSegment {
  readonly kind: 'segment';
  readonly strategy: 'extend';
  /** Its index in the program header table. */
  readonly index: number;
}

/** A new PT_LOAD for the region, and how the program header table gets the entry for it. */
export interface NewSegment {
  readonly kind: 'segment';
  readonly strategy: Exclude<TableStrategy, 'extend'>;
  /** Where the region starts: its file offset (the end of the file, or past it) and its address. */
  readonly start: number;
  readonly vaddr: number;
  readonly align: number;
  /** `null-slot`: the index of the PT_NULL entry that becomes the new PT_LOAD. */
  readonly nullSlot: number;
  /** What the table grows over, with its address: copied into the region, first thing in it. */
  readonly grow: readonly GrowRange[];
}

export interface GrowRange extends MovableRange {
  readonly vaddr: number;
}

export type SegmentChoice = ExtendedSegment | NewSegment;

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
 * Chooses the segment that maps the region at the end of the file, or says that only the whole-file
 * rewrite can (an executable's program header table that can neither grow where it is nor move to
 * where the kernel looks for it), or that no tier can (no room for a new segment). A new segment's
 * place needs the largest .dynsym size (NeedsFacts).
 */
export function chooseSegment(facts: EditFacts): SegmentChoice | NoPlan {
  const extend = extendableSegment(facts);
  if (extend !== null) return { kind: 'segment', strategy: 'extend', index: extend };
  if (facts.largestSymbolSize === null) return needsFacts('dynamic-symbols');
  return newSegment(facts, facts.largestSymbolSize);
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
      `no room for a new segment below 2^53: the highest segment ends at 0x${highestEnd.toString(16)}, ` +
        `and it must start ${reach} bytes above (the largest dynamic symbol's size)`,
    );
  if (!executableTableMoves) {
    return { start: facts.fileSize, vaddr: alignUp(lowestFree, pageSize) + (facts.fileSize % pageSize), align: pageSize };
  }
  const first = loads.reduce((low, ph) => (ph.p_vaddr < low.p_vaddr ? ph : low));
  if (first.p_offset !== 0) {
    return needsRewrite(
      'needs one more program header; the table cannot grow in place, and an executable whose first ' +
        'PT_LOAD does not start at offset 0 cannot have it moved (the kernel finds it by position)',
    );
  }
  const delta = first.p_vaddr;
  const start = Math.max(alignUp(facts.fileSize, facts.codec.wordSize), alignUp(lowestFree, pageSize) - delta);
  if (start - facts.fileSize > MAX_IDENTITY_HOLE) {
    return needsRewrite(
      'needs one more program header; the table cannot grow in place, and moving it where the kernel ' +
        `looks for it would leave a hole of ${Math.round((start - facts.fileSize) / 2 ** 20)} MiB in the ` +
        `file (the memory image, with the largest dynamic symbol's size past it, is that much larger ` +
        'than the file)',
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

/** How the program header table gets the new PT_LOAD's entry, in order of preference, and what it grows over. */
function tableEntry(facts: EditFacts): Pick<NewSegment, 'strategy' | 'nullSlot'> & { readonly grow: readonly MovableRange[] } {
  const { header, programHeaders } = facts;
  const entrySize = header.e_phentsize;
  const nullSlot = programHeaders.findIndex((ph) => ph.p_type === PT.PT_NULL);
  if (nullSlot >= 0) return { strategy: 'null-slot', nullSlot, grow: [] };
  // The single write of header and grown table needs the table right after the ELF header.
  const growNow = header.e_phoff !== header.e_ehsize ? null : roomAfterTable(facts, entrySize, facts.movableRanges);
  if (growNow !== null) return { strategy: 'grow-in-place', nullSlot, grow: growNow };
  const growLater = roomAfterTable(facts, entrySize, [...facts.movableRanges, ...facts.relocatableSections]);
  if (growLater !== null) return { strategy: 'grow-after-move', nullSlot, grow: growLater };
  return { strategy: 'move-table', nullSlot, grow: [] };
}

/**
 * A new PT_LOAD for the region: how the table gets its entry, and where the segment starts, `reach`
 * above every segment (placeNewSegment); NeedsRewrite or Unsupported where none fits.
 */
function newSegment(facts: EditFacts, reach: number): NewSegment | NeedsRewrite | Unsupported {
  const { header, programHeaders, codec } = facts;
  const pageSize = machinePageSize(header.e_machine);
  if (!programHeaders.some(isLoad)) return unsupported('no PT_LOAD segment to place new data after');
  const { strategy, nullSlot, grow: growRanges } = tableEntry(facts);
  const isSharedObject = header.e_type === ET.ET_DYN && !programHeaders.some((ph) => ph.p_type === PT.PT_INTERP);
  const tableMoves = strategy === 'move-table' || strategy === 'grow-after-move';
  const placed = placeNewSegment(
    facts,
    reach + (strategy === 'move-table' ? strippedBelow(facts) : 0),
    pageSize,
    tableMoves && !isSharedObject,
  );
  if ('kind' in placed) return placed;
  // A generous bound on where the new segment ends: the file size again past its start.
  const boundVaddr = placed.vaddr + (placed.start + facts.fileSize - placed.start);
  if (codec.elfClass === 32 && boundVaddr > 0xffffffff) return unsupported('no room for a new segment in a 32-bit address space');
  if (!Number.isSafeInteger(boundVaddr)) return unsupported('no room for a new segment below 2^53: the highest segment ends too high');
  if (programHeaders.length + 2 >= 0xffff) return unsupported('program header table is full (PN_XNUM)');
  const grow: GrowRange[] = [];
  for (const range of growRanges) {
    const vaddr = vaddrAtOffset(facts, range.offset);
    if (vaddr === null) return unsupported(`bytes at 0x${range.offset.toString(16)} are not in any PT_LOAD`);
    grow.push({ ...range, vaddr });
  }
  return { kind: 'segment', strategy, start: placed.start, vaddr: placed.vaddr, align: placed.align, nullSlot, grow };
}

/** The address of a file offset, through the PT_LOAD that maps it; null where none does. */
function vaddrAtOffset(facts: EditFacts, offset: number): number | null {
  const load = facts.programHeaders.find((ph) => isLoad(ph) && offset >= ph.p_offset && offset < ph.p_offset + ph.p_filesz);
  return load === undefined ? null : load.p_vaddr + (offset - load.p_offset);
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
