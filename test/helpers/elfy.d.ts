// Types for the parts of elfy (an untyped CommonJS ELF parser) that the oracle test reads.

declare module 'elfy' {
  export interface ElfyProgram {
    type: string | undefined;
    offset: number;
    vaddr: number;
    paddr: number;
    filesz: number;
    memsz: number;
    flags: Record<string, true>;
    align: number;
  }

  export interface ElfySection {
    name: string;
    type: string | number;
    flags: Record<string, true>;
    addr: number;
    off: number;
    size: number;
    link: number;
    info: number;
    addralign: number;
    entsize: number;
  }

  export interface ElfyFile {
    class: '32' | '64';
    endian: 'lsb' | 'msb';
    type: string | undefined;
    machine: string | undefined;
    version: number;
    entry: number;
    phoff: number;
    shoff: number;
    flags: number;
    ehsize: number;
    phentsize: number;
    phnum: number;
    shentsize: number;
    shnum: number;
    shstrndx: number;
    body: { programs: ElfyProgram[]; sections: ElfySection[] };
  }

  export interface ElfyConstants {
    type: Record<number, string>;
    machine: Record<number, string>;
    entryType: Record<number, string>;
    entryFlags: Record<number, string>;
    sectType: Record<number, string>;
    sectFlags: Record<number, string>;
  }

  const elfy: { parse(buffer: Buffer): ElfyFile; constants: ElfyConstants };
  export default elfy;
}
