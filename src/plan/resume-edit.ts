// Finishing an edit that was cut short. A plan switches the loader to the new tables in its `dynamic`
// phase and only then zeroes the dead strings and rewrites the section headers. A run killed in
// between leaves a file that loads and reads as edited, so the next run would plan nothing for it —
// unless it notices. It does by either of two signs: the dynamic array is marked (cleanup-mark.ts: a
// plan that zeroes strings marks the array from before its switch until its cleanup is done), or the
// `.dynstr` section header no longer describes the table DT_STRTAB/DT_STRSZ name (a moved or grown
// table; cleanup comes before the section headers). Then the section headers are set to what the tags
// say, the table the stale header describes is zeroed when it is no longer the live one (nothing
// refers to a table the tags left), and the strings of the live table that nothing refers to are
// zeroed: that is what the cut-short cleanup would have done, so no replaced /nix/store path stays in
// the file. Strings nothing referred to before the edit either (a build directory's runpath that a
// build tool dropped from the tags) go too: the interrupted run's list of what it freed is lost.
//
// An interpreter path moved into the appended region leaves the `.interp` section header describing
// the old path until the section headers are written, after the old path is zeroed: a `.interp`
// header that no longer describes PT_INTERP is the third sign. Its header is set to what PT_INTERP
// says, and the old path's bytes are zeroed where nothing else claims them (the program header table
// may have grown over its start).

import type { EditFacts } from './edit-facts.js';
import { PT, type Section, SHT } from '../elf/elf.js';
import type { Range } from './string-placement.js';
import { cleanupMarked } from './cleanup-mark.js';
import { isInterpreterSection } from './section-writes.js';

export interface SectionRepair {
  readonly section: Section;
  readonly fields: { readonly sh_offset: number; readonly sh_addr: number; readonly sh_size: number };
}

export interface Resume {
  /** Section headers to set to what the dynamic tags say. */
  readonly sections: readonly SectionRepair[];
  /** File ranges to zero: a table the tags have left, an interpreter path PT_INTERP has left. */
  readonly deadFileRanges: readonly Range[];
  /** Whether the strings of the live table that nothing refers to are zeroed (found by placement). */
  readonly unreferencedStrings: boolean;
}

/** Null for a file no edit was cut short in; else the section headers to set and the ranges to zero. */
export function resumeOf(facts: EditFacts): Resume | null {
  const table = staleHeaderRepairs(facts);
  const interpreter = staleInterpreterRepairs(facts);
  if (table === null && interpreter === null) return cleanupMarked(facts.codec, facts.dynamic) ? stringsOnly : null;
  const parts = [table, interpreter].filter((part): part is Resume => part !== null);
  return {
    sections: parts.flatMap((part) => part.sections),
    deadFileRanges: parts.flatMap((part) => part.deadFileRanges),
    unreferencedStrings: table !== null || cleanupMarked(facts.codec, facts.dynamic),
  };
}

const stringsOnly: Resume = { sections: [], deadFileRanges: [], unreferencedStrings: true };

/**
 * What a `.interp` section header that no longer describes PT_INTERP says is left to do: the header
 * set to PT_INTERP's place, and the old path zeroed. The old path's range is zeroed only where the
 * program header table does not now lie, and only when nothing else claims it (no other section, no
 * segment but the PT_LOAD around it, not the dynamic array or strings) and it is no longer than a
 * path can be: a damaged header that points elsewhere gets its header set and no byte zeroed.
 */
function staleInterpreterRepairs(facts: EditFacts): Resume | null {
  const live = facts.interpreter;
  const section = facts.sections.find(isInterpreterSection);
  if (live === null || section === undefined) return null;
  if (section.sh_offset === live.offset && section.sh_addr === live.vaddr && section.sh_size === live.size) return null;
  const fields = { sh_offset: live.offset, sh_addr: live.vaddr, sh_size: live.size };
  return { sections: [{ section, fields }], deadFileRanges: leftInterpreter(facts, section), unreferencedStrings: false };
}

/** The longest range a path with its NUL takes (PATH_MAX, which the kernel holds PT_INTERP to). */
const PATH_MAX = 4096;

function leftInterpreter(facts: EditFacts, section: Section): Range[] {
  const { header, programHeaders } = facts;
  const tableEnd = header.e_phoff + programHeaders.length * header.e_phentsize;
  const start = section.sh_offset >= header.e_phoff && section.sh_offset < tableEnd ? tableEnd : section.sh_offset;
  const end = section.sh_offset + section.sh_size;
  if (section.sh_size > PATH_MAX || end > facts.fileSize || start >= end) return [];
  const overlaps = (offset: number, size: number): boolean => size > 0 && offset < end && start < offset + size;
  const live = facts.interpreter;
  const claimed =
    (live !== null && overlaps(live.offset, live.size)) ||
    overlaps(facts.dynamic.offset, facts.dynamic.bytes.length) ||
    overlaps(facts.dynstr.offset, facts.dynstr.bytes.length) ||
    overlaps(header.e_phoff, tableEnd - header.e_phoff) ||
    programHeaders.some((ph) => ph.p_type !== PT.PT_LOAD && ph.p_type !== PT.PT_PHDR && overlaps(ph.p_offset, ph.p_filesz)) ||
    facts.sections.some(
      (other) => other.index !== section.index && other.sh_type !== SHT.SHT_NOBITS && overlaps(other.sh_offset, other.sh_size),
    );
  return claimed ? [] : [{ start, end }];
}

/** What a `.dynstr` section header that no longer describes the live table says is left to do; null when it does. */
function staleHeaderRepairs(facts: EditFacts): Resume | null {
  const dynamicSection = facts.sections.find((s) => s.sh_type === SHT.SHT_DYNAMIC);
  const linked = dynamicSection === undefined ? undefined : facts.sections[dynamicSection.sh_link];
  const stringsSection =
    linked?.sh_type === SHT.SHT_STRTAB ? linked : facts.sections.find((s) => s.sh_type === SHT.SHT_STRTAB && s.name === '.dynstr');
  if (stringsSection === undefined) return null;
  const table = { sh_offset: facts.dynstr.offset, sh_addr: facts.dynstr.vaddr, sh_size: facts.dynstr.bytes.length };
  if (stringsSection.sh_offset === table.sh_offset && stringsSection.sh_addr === table.sh_addr && stringsSection.sh_size === table.sh_size)
    return null;

  const sections: SectionRepair[] = [{ section: stringsSection, fields: table }];
  const dynamic = { sh_offset: facts.dynamic.offset, sh_addr: facts.dynamic.vaddr, sh_size: dynamicSection?.sh_size ?? 0 };
  if (dynamicSection !== undefined && (dynamicSection.sh_offset !== dynamic.sh_offset || dynamicSection.sh_addr !== dynamic.sh_addr)) {
    const programHeader = facts.programHeaders.find((ph) => ph.p_offset === facts.dynamic.offset);
    sections.push({ section: dynamicSection, fields: { ...dynamic, sh_size: programHeader?.p_filesz ?? dynamic.sh_size } });
  }
  // The table the stale header describes, when the tags have left it: nothing refers to it any more.
  const left = { start: stringsSection.sh_offset, end: stringsSection.sh_offset + stringsSection.sh_size };
  const live = { start: facts.dynstr.offset, end: facts.dynstr.offset + facts.dynstr.bytes.length };
  const tableLeft =
    stringsSection.sh_addr !== table.sh_addr && left.end <= facts.fileSize && (left.end <= live.start || live.end <= left.start);
  const overlapsDynamic = left.start < facts.dynamic.offset + facts.dynamic.bytes.length && facts.dynamic.offset < left.end;
  return { sections, deadFileRanges: tableLeft && !overlapsDynamic ? [left] : [], unreferencedStrings: true };
}

/** The start of every NUL-terminated string of a table. */
export function stringStarts(table: Uint8Array): number[] {
  const starts: number[] = [];
  for (let at = 0; at < table.length; ) {
    const nul = table.indexOf(0, at);
    if (nul < 0) break;
    if (nul > at) starts.push(at);
    at = nul + 1;
  }
  return starts;
}
