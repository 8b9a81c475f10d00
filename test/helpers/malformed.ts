// Malformed ELF files made from a real one: truncations at every structure boundary and fields set to
// values that point outside the file, outside every segment, or back into other structures.
//
// The structures are located here with a small decoder of its own, not with the reader under test, so a
// reader bug cannot hide the very corruption meant to expose it.

import { DT, PT } from '../../src/elf/constants.js';

export interface RawProgramHeader {
  /** File offset of this entry in the program header table. */
  readonly at: number;
  readonly type: number;
  readonly offset: number;
  readonly vaddr: number;
  readonly filesz: number;
  readonly memsz: number;
}

export interface RawDynamicEntry {
  readonly at: number;
  readonly tag: number;
  readonly val: number;
}

export interface RawLayout {
  readonly elfClass: 32 | 64;
  readonly little: boolean;
  readonly phoff: number;
  readonly phentsize: number;
  readonly phnum: number;
  readonly shoff: number;
  readonly headerSize: number;
  readonly programHeaders: readonly RawProgramHeader[];
  readonly dynamic: { readonly offset: number; readonly filesz: number; readonly entries: readonly RawDynamicEntry[] } | null;
  readonly dynstr: { readonly offset: number; readonly size: number } | null;
  readonly interp: { readonly offset: number; readonly filesz: number } | null;
}

const PN_XNUM = 0xffff;

/** Byte offsets of the fields this corpus touches, per class (the gABI Elf32 and Elf64 record layouts). */
export function fieldOffsets(elfClass: 32 | 64) {
  return elfClass === 64
    ? {
        e_phoff: 32,
        e_shoff: 40,
        e_phentsize: 54,
        e_phnum: 56,
        e_shentsize: 58,
        e_shnum: 60,
        p_offset: 8,
        p_filesz: 32,
        p_type: 0,
        word: 8,
        dyn: 16,
        sh_info: 44,
        shdr: 64,
      }
    : {
        e_phoff: 28,
        e_shoff: 32,
        e_phentsize: 42,
        e_phnum: 44,
        e_shentsize: 46,
        e_shnum: 48,
        p_offset: 4,
        p_filesz: 16,
        p_type: 0,
        word: 4,
        dyn: 8,
        sh_info: 28,
        shdr: 40,
      };
}

function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export function readUnsigned(bytes: Uint8Array, at: number, width: 1 | 2 | 4 | 8, little: boolean): number {
  const v = view(bytes);
  if (width === 1) return v.getUint8(at);
  if (width === 2) return v.getUint16(at, little);
  if (width === 4) return v.getUint32(at, little);
  return Number(v.getBigUint64(at, little));
}

export function writeUnsigned(bytes: Uint8Array, at: number, width: 2 | 4 | 8, little: boolean, value: number | bigint): void {
  const v = view(bytes);
  if (width === 2) v.setUint16(at, Number(value), little);
  else if (width === 4) v.setUint32(at, Number(BigInt.asUintN(32, BigInt(value))), little);
  else v.setBigUint64(at, BigInt.asUintN(64, BigInt(value)), little);
}

/** Locates the header, program headers, dynamic array, .dynstr (through DT_STRTAB and the PT_LOADs) and PT_INTERP. */
export function rawLayout(bytes: Uint8Array): RawLayout {
  if (bytes[0] !== 0x7f || bytes[1] !== 0x45 || bytes[2] !== 0x4c || bytes[3] !== 0x46) throw new Error('not an ELF file');
  const elfClass = bytes[4] === 2 ? 64 : 32;
  const little = bytes[5] === 1;
  const f = fieldOffsets(elfClass);
  const w = f.word as 4 | 8;
  const phoff = readUnsigned(bytes, f.e_phoff, w, little);
  const phentsize = readUnsigned(bytes, f.e_phentsize, 2, little);
  const phnum = readUnsigned(bytes, f.e_phnum, 2, little);
  const shoff = readUnsigned(bytes, f.e_shoff, w, little);
  const programHeaders: RawProgramHeader[] = [];
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    programHeaders.push({
      at,
      type: readUnsigned(bytes, at + f.p_type, 4, little),
      offset: readUnsigned(bytes, at + f.p_offset, w, little),
      vaddr: readUnsigned(bytes, at + f.p_offset + w, w, little),
      filesz: readUnsigned(bytes, at + f.p_filesz, w, little),
      memsz: readUnsigned(bytes, at + f.p_filesz + w, w, little),
    });
  }
  const dynamicHeader = programHeaders.find((ph) => ph.type === PT.PT_DYNAMIC);
  let dynamic: RawLayout['dynamic'] = null;
  let dynstr: RawLayout['dynstr'] = null;
  if (dynamicHeader !== undefined) {
    const entries: RawDynamicEntry[] = [];
    for (let at = dynamicHeader.offset; at + f.dyn <= dynamicHeader.offset + dynamicHeader.filesz; at += f.dyn) {
      entries.push({ at, tag: readUnsigned(bytes, at, w, little), val: readUnsigned(bytes, at + w, w, little) });
    }
    dynamic = { offset: dynamicHeader.offset, filesz: dynamicHeader.filesz, entries };
    const live = entries.slice(
      0,
      entries.findIndex((e) => e.tag === DT.DT_NULL),
    );
    const strtab = live.find((e) => e.tag === DT.DT_STRTAB)?.val;
    const strsz = live.find((e) => e.tag === DT.DT_STRSZ)?.val;
    if (strtab !== undefined && strsz !== undefined) {
      const load = programHeaders.find((ph) => ph.type === PT.PT_LOAD && strtab >= ph.vaddr && strtab + strsz <= ph.vaddr + ph.filesz);
      if (load !== undefined) dynstr = { offset: load.offset + (strtab - load.vaddr), size: strsz };
    }
  }
  const interpHeader = programHeaders.find((ph) => ph.type === PT.PT_INTERP);
  return {
    elfClass,
    little,
    phoff,
    phentsize,
    phnum,
    shoff,
    headerSize: elfClass === 64 ? 64 : 52,
    programHeaders,
    dynamic,
    dynstr,
    interp: interpHeader === undefined ? null : { offset: interpHeader.offset, filesz: interpHeader.filesz },
  };
}

/**
 * What the reader must say about a case. `offset`: the exact offset the message must name, `'any'` for
 * some offset, `'none'` where no structure is at fault (an empty file, a file that cannot be opened),
 * `'optional'` for a file cut short inside the ELF header, which may or may not be given a place.
 */
export interface Expectation {
  readonly message: RegExp;
  readonly offset: number | bigint | 'any' | 'none' | 'optional';
}

export interface MalformedCase {
  readonly name: string;
  readonly bytes: Uint8Array;
  /** null: overlapping structures that a reader may accept or refuse, as long as it does so cleanly. */
  readonly expect: Expectation | null;
}

const PAST_END = /runs past the end of the file/;

/** Every malformed variant that `base` has the structures for. */
export function malformedCorpus(base: Uint8Array): MalformedCase[] {
  const layout = rawLayout(base);
  const f = fieldOffsets(layout.elfClass);
  const w = f.word as 4 | 8;
  const le = layout.little;
  const cases: MalformedCase[] = [];
  const add = (name: string, bytes: Uint8Array, expect: Expectation | null): void => {
    cases.push({ name, bytes, expect });
  };
  const truncated = (length: number): Uint8Array => base.slice(0, length);
  const edited = (edit: (bytes: Uint8Array) => void): Uint8Array => {
    const copy = base.slice();
    edit(copy);
    return copy;
  };
  const tooShort = { message: /too short|truncated/, offset: 'optional' } as const;

  add('empty', new Uint8Array(0), { message: /empty file/, offset: 'none' });
  add('three-bytes', base.slice(0, 3), tooShort);
  add('three-bytes-not-elf', new TextEncoder().encode('ok\n'), { message: /not an ELF file/, offset: 0 });
  add('text-file', new TextEncoder().encode('#!/bin/sh\necho this is not an ELF file\n'), { message: /not an ELF file/, offset: 0 });
  add(
    'bad-class',
    edited((b) => (b[4] = 3)),
    { message: /unknown ELF class 3/, offset: 4 },
  );
  add(
    'bad-byte-order',
    edited((b) => (b[5] = 0)),
    { message: /unknown byte order 0/, offset: 5 },
  );

  // Truncations, in file order of the structures they cut.
  add('truncated-inside-ident', truncated(10), tooShort);
  add('truncated-after-ident', truncated(16), tooShort);
  add('truncated-inside-elf-header', truncated(layout.headerSize - 10), tooShort);
  const pht = { message: /program header table.*runs past the end of the file/, offset: layout.phoff };
  if (layout.phoff >= layout.headerSize) add('truncated-after-elf-header', truncated(layout.phoff), pht);
  add('truncated-inside-pht', truncated(layout.phoff + Math.floor(layout.phentsize * 1.5)), pht);
  add('truncated-inside-last-phdr', truncated(layout.phoff + layout.phnum * layout.phentsize - 1), pht);
  if (layout.dynamic !== null) {
    const dynamicPastEnd = { message: /dynamic array.*runs past the end of the file/, offset: layout.dynamic.offset };
    const afterPht = layout.phoff + layout.phnum * layout.phentsize;
    if (afterPht < layout.dynamic.offset) add('truncated-after-pht', truncated(afterPht), dynamicPastEnd);
    add('truncated-at-dynamic-array', truncated(layout.dynamic.offset), dynamicPastEnd);
    add('truncated-inside-dynamic-array', truncated(layout.dynamic.offset + 2 * f.dyn + 3), dynamicPastEnd);
    add('truncated-inside-dynamic-terminator', truncated(layout.dynamic.offset + layout.dynamic.filesz - 1), dynamicPastEnd);
  }
  if (layout.dynstr !== null) {
    add('truncated-inside-dynstr', truncated(layout.dynstr.offset + Math.floor(layout.dynstr.size / 2)), {
      message: PAST_END,
      offset: 'any',
    });
  }
  if (layout.interp !== null) {
    add('truncated-inside-interpreter', truncated(layout.interp.offset + 5), { message: PAST_END, offset: 'any' });
  }

  // ELF header fields out of range.
  const past = base.length + 8;
  add(
    'e_phoff-past-end',
    edited((b) => writeUnsigned(b, f.e_phoff, w, le, past)),
    { ...pht, offset: past },
  );
  add(
    'e_phoff-last-byte',
    edited((b) => writeUnsigned(b, f.e_phoff, w, le, base.length - 1)),
    { ...pht, offset: base.length - 1 },
  );
  if (w === 8) {
    add(
      'e_phoff-2^63',
      edited((b) => writeUnsigned(b, f.e_phoff, 8, le, 2n ** 63n)),
      { message: /program header table.*has an impossible offset/, offset: 2n ** 63n },
    );
    add(
      'e_phoff-all-ones',
      edited((b) => writeUnsigned(b, f.e_phoff, 8, le, 2n ** 64n - 1n)),
      { message: /program header table.*has an impossible offset/, offset: 'any' },
    );
  } else {
    add(
      'e_phoff-all-ones',
      edited((b) => writeUnsigned(b, f.e_phoff, 4, le, 0xffffffff)),
      { ...pht, offset: 0xffffffff },
    );
  }
  add(
    'e_phnum-0xfffe',
    edited((b) => writeUnsigned(b, f.e_phnum, 2, le, 0xfffe)),
    pht,
  );
  add(
    'e_phentsize-0',
    edited((b) => writeUnsigned(b, f.e_phentsize, 2, le, 0)),
    { message: /e_phentsize is 0,/, offset: 'any' },
  );
  add(
    'e_phentsize-0xffff',
    edited((b) => writeUnsigned(b, f.e_phentsize, 2, le, 0xffff)),
    { message: /e_phentsize is 65535/, offset: 'any' },
  );
  add(
    'e_phnum-pn_xnum-without-section-headers',
    edited((b) => {
      writeUnsigned(b, f.e_phnum, 2, le, PN_XNUM);
      writeUnsigned(b, f.e_shoff, w, le, 0);
    }),
    { message: /PN_XNUM/, offset: 'any' },
  );
  add(
    'e_phnum-pn_xnum-e_shoff-past-end',
    edited((b) => {
      writeUnsigned(b, f.e_phnum, 2, le, PN_XNUM);
      writeUnsigned(b, f.e_shoff, w, le, past);
    }),
    { message: /section header 0.*runs past the end of the file/, offset: past },
  );
  if (layout.shoff !== 0 && layout.shoff + f.shdr <= base.length) {
    // Section 0 gives the count back as PN_XNUM: the count must be taken as a number, never followed again.
    add(
      'e_phnum-pn_xnum-loops-to-pn_xnum',
      edited((b) => {
        writeUnsigned(b, f.e_phnum, 2, le, PN_XNUM);
        writeUnsigned(b, layout.shoff + f.sh_info, 4, le, PN_XNUM);
      }),
      pht,
    );
    add(
      'e_phnum-pn_xnum-count-0xffffffff',
      edited((b) => {
        writeUnsigned(b, f.e_phnum, 2, le, PN_XNUM);
        writeUnsigned(b, layout.shoff + f.sh_info, 4, le, 0xffffffff);
      }),
      pht,
    );
  }
  // Section 0 overlaps the program header table: the count comes from a p_offset or p_vaddr field.
  add(
    'e_phnum-pn_xnum-section-0-over-pht',
    edited((b) => {
      writeUnsigned(b, f.e_phnum, 2, le, PN_XNUM);
      writeUnsigned(b, f.e_shoff, w, le, layout.phoff);
    }),
    null,
  );

  const ph = (type: number): RawProgramHeader | undefined => layout.programHeaders.find((p) => p.type === type);
  const dynamicHeader = ph(PT.PT_DYNAMIC);
  if (dynamicHeader !== undefined && layout.dynamic !== null) {
    const dynamic = layout.dynamic;
    const dynOffsetField = dynamicHeader.at + f.p_offset;
    add(
      'pt_dynamic-filesz-0',
      edited((b) => writeUnsigned(b, dynamicHeader.at + f.p_filesz, w, le, 0)),
      { message: /too small for one entry/, offset: dynamic.offset },
    );
    add(
      'pt_dynamic-past-end',
      edited((b) => writeUnsigned(b, dynOffsetField, w, le, past)),
      { message: /dynamic array.*runs past the end/, offset: past },
    );
    if (w === 8) {
      add(
        'pt_dynamic-offset-2^63',
        edited((b) => writeUnsigned(b, dynOffsetField, 8, le, 2n ** 63n)),
        { message: /impossible offset/, offset: 2n ** 63n },
      );
    }
    add(
      'pt_dynamic-filesz-all-ones',
      edited((b) => writeUnsigned(b, dynamicHeader.at + f.p_filesz, w, le, 2n ** BigInt(w * 8) - 1n)),
      { message: /dynamic array/, offset: 'any' },
    );
    const other = layout.programHeaders.find((p) => p.type !== PT.PT_DYNAMIC && p.type !== PT.PT_LOAD);
    if (other !== undefined) {
      add(
        'two-pt_dynamic',
        edited((b) => writeUnsigned(b, other.at + f.p_type, 4, le, PT.PT_DYNAMIC)),
        { message: /2 PT_DYNAMIC program headers/, offset: 'any' },
      );
    }
    add(
      'dynamic-without-dt_null',
      edited((b) => {
        for (const e of dynamic.entries) if (e.tag === DT.DT_NULL) writeUnsigned(b, e.at, w, le, DT.DT_DEBUG);
      }),
      { message: /no DT_NULL terminator/, offset: dynamic.offset },
    );
    const strtab = dynamic.entries.find((e) => e.tag === DT.DT_STRTAB);
    const strsz = dynamic.entries.find((e) => e.tag === DT.DT_STRSZ);
    const needed = dynamic.entries.find((e) => e.tag === DT.DT_NEEDED);
    if (strtab !== undefined && strsz !== undefined) {
      const unmapped = w === 8 ? 0x7fff_0000_0000 : 0xfff0_0000;
      add(
        'dt_strtab-unmapped',
        edited((b) => writeUnsigned(b, strtab.at + w, w, le, unmapped)),
        { message: /DT_STRTAB.*is not inside the file part of/, offset: 'any' },
      );
      add(
        'dt_strsz-beyond-segment',
        edited((b) => writeUnsigned(b, strsz.at + w, w, le, base.length)),
        { message: /DT_STRTAB.*is not inside the file part of/, offset: 'any' },
      );
      add(
        'dt_strsz-without-dt_strtab',
        edited((b) => writeUnsigned(b, strtab.at, w, le, DT.DT_DEBUG)),
        { message: /DT_STRSZ without DT_STRTAB/, offset: dynamic.offset },
      );
      if (w === 8) {
        // Two PT_LOADs that continue each other far above 2^53, where a double cannot hold every address:
        // the table [2^60, 2^60+1000) is covered by neither [2^60, 2^60+200) nor [2^60+256, 2^60+356).
        const [first, second] = layout.programHeaders.filter((p) => p.type === PT.PT_LOAD);
        if (first !== undefined && second !== undefined) {
          const top = 2n ** 60n;
          add(
            'pt_load-chain-above-2^53',
            edited((b) => {
              writeUnsigned(b, first.at + f.p_offset + w, 8, le, top);
              writeUnsigned(b, first.at + f.p_filesz, 8, le, 200);
              writeUnsigned(b, second.at + f.p_offset, 8, le, BigInt(first.offset) + 256n);
              writeUnsigned(b, second.at + f.p_offset + w, 8, le, top + 256n);
              writeUnsigned(b, second.at + f.p_filesz, 8, le, 100);
              writeUnsigned(b, strtab.at + w, 8, le, top);
              writeUnsigned(b, strsz.at + w, 8, le, 1000);
            }),
            { message: /DT_STRTAB.*is not inside the file part of/, offset: 'any' },
          );
        }
      }
      // The string table starts on the dynamic array itself.
      add(
        'dt_strtab-over-dynamic',
        edited((b) => writeUnsigned(b, strtab.at + w, w, le, dynamicHeader.vaddr)),
        null,
      );
    }
    if (needed !== undefined && layout.dynstr !== null) {
      const dynstr = layout.dynstr;
      add(
        'dt_needed-index-past-dynstr',
        edited((b) => writeUnsigned(b, needed.at + w, w, le, 0xffffffff)),
        { message: /string index 4294967295 is outside the dynamic string table/, offset: dynstr.offset },
      );
      add(
        'dynstr-without-nul',
        edited((b) => b.fill(0x41, dynstr.offset, dynstr.offset + dynstr.size)),
        { message: /no NUL terminator/, offset: 'any' },
      );
    }
    // PT_DYNAMIC on top of the ELF header and program header table.
    add(
      'pt_dynamic-over-elf-header',
      edited((b) => writeUnsigned(b, dynOffsetField, w, le, 0)),
      null,
    );
  }
  const interpHeader = ph(PT.PT_INTERP);
  if (interpHeader !== undefined && layout.interp !== null) {
    const interp = layout.interp;
    add(
      'interpreter-without-nul',
      edited((b) => (b[interp.offset + interp.filesz - 1] = 0x2f)),
      { message: /interpreter path \(PT_INTERP\) has no NUL terminator/, offset: interp.offset },
    );
    add(
      'interpreter-past-end',
      edited((b) => writeUnsigned(b, interpHeader.at + f.p_filesz, w, le, base.length)),
      { message: /interpreter path.*runs past the end/, offset: interp.offset },
    );
  }
  return cases;
}
