// ELF constants (gABI, glibc elf.h) with name tables, so values print as their names.

/** A numeric constant space: value → name, plus the named ranges that unknown values fall into. */
export interface NameTable {
  readonly names: ReadonlyMap<number, string>;
  /** Ranges, for naming unknown values as `BASE+0xN` (e.g. `DT_LOOS+0x3`). Checked in order. */
  readonly ranges: readonly { readonly low: number; readonly high: number; readonly base: string }[];
}

function table(entries: Record<string, number>, ranges: NameTable['ranges'] = []): NameTable {
  const names = new Map<number, string>();
  for (const [name, value] of Object.entries(entries)) {
    // The first name given for a value wins (aliases such as DT_LOOS = DT_... come later).
    if (!names.has(value)) names.set(value, name);
  }
  return { names, ranges };
}

/** `DT_RUNPATH` for a known value, `DT_LOOS+0x3` inside a named range, else the hex value. */
export function nameOf(tableOf: NameTable, value: number): string {
  const known = tableOf.names.get(value);
  if (known !== undefined) return known;
  for (const range of tableOf.ranges) {
    if (value >= range.low && value <= range.high) return `${range.base}+0x${(value - range.low).toString(16)}`;
  }
  return `0x${value.toString(16)}`;
}

export const ELFCLASS32 = 1;
export const ELFCLASS64 = 2;
export const ELFDATA2LSB = 1;
export const ELFDATA2MSB = 2;
export const EV_CURRENT = 1;
export const ELF_MAGIC = Uint8Array.of(0x7f, 0x45, 0x4c, 0x46);
/** The first bytes of an ar archive (a static library): its members are object files, not ELF of their own. */
export const AR_MAGIC = Uint8Array.from('!<arch>\n', (char) => char.charCodeAt(0));
export const EI_NIDENT = 16;
/** e_phnum value meaning "the real count is in section header 0's sh_info". */
export const PN_XNUM = 0xffff;

export const ET = { ET_NONE: 0, ET_REL: 1, ET_EXEC: 2, ET_DYN: 3, ET_CORE: 4 } as const;
export const ET_NAMES = table(ET, [
  { low: 0xfe00, high: 0xfeff, base: 'ET_LOOS' },
  { low: 0xff00, high: 0xffff, base: 'ET_LOPROC' },
]);

export const EM = {
  EM_NONE: 0,
  EM_386: 3,
  EM_68K: 4,
  EM_MIPS: 8,
  EM_PPC: 20,
  EM_PPC64: 21,
  EM_S390: 22,
  EM_ARM: 40,
  EM_SPARCV9: 43,
  EM_IA_64: 50,
  EM_X86_64: 62,
  EM_AARCH64: 183,
  EM_CUDA: 190,
  EM_RISCV: 243,
  EM_LOONGARCH: 258,
} as const;
export const EM_NAMES = table(EM);

export const PT = {
  PT_NULL: 0,
  PT_LOAD: 1,
  PT_DYNAMIC: 2,
  PT_INTERP: 3,
  PT_NOTE: 4,
  PT_SHLIB: 5,
  PT_PHDR: 6,
  PT_TLS: 7,
  PT_GNU_EH_FRAME: 0x6474e550,
  PT_GNU_STACK: 0x6474e551,
  PT_GNU_RELRO: 0x6474e552,
  PT_GNU_PROPERTY: 0x6474e553,
  PT_ARM_EXIDX: 0x70000001,
} as const;

export const PF_X = 1;
export const PF_W = 2;
export const PF_R = 4;

export const DT = {
  DT_NULL: 0,
  DT_NEEDED: 1,
  DT_PLTRELSZ: 2,
  DT_PLTGOT: 3,
  DT_HASH: 4,
  DT_STRTAB: 5,
  DT_SYMTAB: 6,
  DT_RELA: 7,
  DT_RELASZ: 8,
  DT_RELAENT: 9,
  DT_STRSZ: 10,
  DT_SYMENT: 11,
  DT_INIT: 12,
  DT_FINI: 13,
  DT_SONAME: 14,
  DT_RPATH: 15,
  DT_SYMBOLIC: 16,
  DT_REL: 17,
  DT_RELSZ: 18,
  DT_RELENT: 19,
  DT_PLTREL: 20,
  DT_DEBUG: 21,
  DT_TEXTREL: 22,
  DT_JMPREL: 23,
  DT_BIND_NOW: 24,
  DT_INIT_ARRAY: 25,
  DT_FINI_ARRAY: 26,
  DT_INIT_ARRAYSZ: 27,
  DT_FINI_ARRAYSZ: 28,
  DT_RUNPATH: 29,
  DT_FLAGS: 30,
  DT_PREINIT_ARRAY: 32,
  DT_PREINIT_ARRAYSZ: 33,
  DT_SYMTAB_SHNDX: 34,
  DT_RELRSZ: 35,
  DT_RELR: 36,
  DT_RELRENT: 37,
  DT_GNU_PRELINKED: 0x6ffffdf5,
  DT_GNU_CONFLICTSZ: 0x6ffffdf6,
  DT_GNU_LIBLISTSZ: 0x6ffffdf7,
  DT_CHECKSUM: 0x6ffffdf8,
  DT_PLTPADSZ: 0x6ffffdf9,
  DT_MOVEENT: 0x6ffffdfa,
  DT_MOVESZ: 0x6ffffdfb,
  DT_FEATURE_1: 0x6ffffdfc,
  DT_POSFLAG_1: 0x6ffffdfd,
  DT_SYMINSZ: 0x6ffffdfe,
  DT_SYMINENT: 0x6ffffdff,
  DT_GNU_HASH: 0x6ffffef5,
  DT_TLSDESC_PLT: 0x6ffffef6,
  DT_TLSDESC_GOT: 0x6ffffef7,
  DT_GNU_CONFLICT: 0x6ffffef8,
  DT_GNU_LIBLIST: 0x6ffffef9,
  DT_CONFIG: 0x6ffffefa,
  DT_DEPAUDIT: 0x6ffffefb,
  DT_AUDIT: 0x6ffffefc,
  DT_PLTPAD: 0x6ffffefd,
  DT_MOVETAB: 0x6ffffefe,
  DT_SYMINFO: 0x6ffffeff,
  DT_VERSYM: 0x6ffffff0,
  DT_RELACOUNT: 0x6ffffff9,
  DT_RELCOUNT: 0x6ffffffa,
  DT_FLAGS_1: 0x6ffffffb,
  DT_VERDEF: 0x6ffffffc,
  DT_VERDEFNUM: 0x6ffffffd,
  DT_VERNEED: 0x6ffffffe,
  DT_VERNEEDNUM: 0x6fffffff,
  DT_AUXILIARY: 0x7ffffffd,
  DT_FILTER: 0x7fffffff,
} as const;
export const DT_NAMES = table(DT, [
  { low: 0x6000000d, high: 0x6ffff000, base: 'DT_LOOS' },
  { low: 0x70000000, high: 0x7fffffff, base: 'DT_LOPROC' },
]);

export const SHT = {
  SHT_NULL: 0,
  SHT_PROGBITS: 1,
  SHT_SYMTAB: 2,
  SHT_STRTAB: 3,
  SHT_RELA: 4,
  SHT_HASH: 5,
  SHT_DYNAMIC: 6,
  SHT_NOTE: 7,
  SHT_NOBITS: 8,
  SHT_REL: 9,
  SHT_DYNSYM: 11,
  SHT_INIT_ARRAY: 14,
  SHT_FINI_ARRAY: 15,
  SHT_PREINIT_ARRAY: 16,
  SHT_GROUP: 17,
  SHT_SYMTAB_SHNDX: 18,
  SHT_RELR: 19,
  SHT_GNU_ATTRIBUTES: 0x6ffffff5,
  SHT_GNU_HASH: 0x6ffffff6,
  SHT_GNU_LIBLIST: 0x6ffffff7,
  SHT_GNU_VERDEF: 0x6ffffffd,
  SHT_GNU_VERNEED: 0x6ffffffe,
  SHT_GNU_VERSYM: 0x6fffffff,
} as const;

/** sh_flags: the section occupies memory at run time. */
export const SHF_ALLOC = 0x2;

/** DT_FLAGS bits. */
export const DF_NAMES: ReadonlyMap<number, string> = new Map([
  [0x1, 'ORIGIN'],
  [0x2, 'SYMBOLIC'],
  [0x4, 'TEXTREL'],
  [0x8, 'BIND_NOW'],
  [0x10, 'STATIC_TLS'],
]);

/** The DT_FLAGS_1 bits the loader acts on (doctor) and that tell a static-pie (skipReason). */
export const DF_1 = { NOOPEN: 0x40, NODEFLIB: 0x800, PIE: 0x08000000 } as const;

/** DT_FLAGS_1 bits. */
export const DF_1_NAMES: ReadonlyMap<number, string> = new Map([
  [0x1, 'NOW'],
  [0x2, 'GLOBAL'],
  [0x4, 'GROUP'],
  [0x8, 'NODELETE'],
  [0x10, 'LOADFLTR'],
  [0x20, 'INITFIRST'],
  [0x40, 'NOOPEN'],
  [0x80, 'ORIGIN'],
  [0x100, 'DIRECT'],
  [0x200, 'TRANS'],
  [0x400, 'INTERPOSE'],
  [0x800, 'NODEFLIB'],
  [0x1000, 'NODUMP'],
  [0x2000, 'CONFALT'],
  [0x4000, 'ENDFILTEE'],
  [0x8000, 'DISPRELDNE'],
  [0x10000, 'DISPRELPND'],
  [0x20000, 'NODIRECT'],
  [0x40000, 'IGNMULDEF'],
  [0x80000, 'NOKSYMS'],
  [0x100000, 'NOHDR'],
  [0x200000, 'EDITED'],
  [0x400000, 'NORELOC'],
  [0x800000, 'SYMINTPOSE'],
  [0x1000000, 'GLOBAUDIT'],
  [0x2000000, 'SINGLETON'],
  [0x4000000, 'STUB'],
  [0x8000000, 'PIE'],
]);

/** Names of the set bits of a flags word, unknown bits as hex. */
export function flagNames(names: ReadonlyMap<number, string>, value: number): string[] {
  const out: string[] = [];
  let rest = value >>> 0;
  for (let bit = 1; rest !== 0 && bit !== 0; bit = (bit << 1) >>> 0) {
    if ((rest & bit) === 0) continue;
    out.push(names.get(bit) ?? `0x${bit.toString(16)}`);
    rest = (rest & ~bit) >>> 0;
  }
  return out;
}

/** The machine's largest page size: what a new PT_LOAD must be aligned to (docs/design.md, The ELF facts the edits rely on). */
export function machinePageSize(machine: number): number {
  switch (machine) {
    case EM.EM_AARCH64:
    case EM.EM_PPC64:
    case EM.EM_MIPS:
    case EM.EM_LOONGARCH:
    case EM.EM_IA_64:
      return 0x10000;
    case EM.EM_SPARCV9:
      return 0x2000;
    default:
      return 0x1000;
  }
}
