// The ELF reader's one public module: what the other layers may use of elf/. The modules behind it
// are its own, and may change shape without touching a caller. hook-engine/ and resolve/, which must
// not load the reader, import its pure modules directly (byte-string.ts, constants.ts, runpath-list.ts):
// this module loads the file reader with them.

export { FileByteSource, FileHead, checkRange, dataViewOf, withFileByteSource } from './byte-source.js';
export type { ByteSource, ReadSeed } from './byte-source.js';
export {
  asciiByteString,
  byteStringToBytes,
  byteStringToText,
  bytesToByteString,
  concatByteStrings,
  dirnameBytePath,
  EMPTY_BYTE_STRING,
  joinByteStrings,
  joinBytePath,
  sliceByteString,
  splitByteString,
  textToByteString,
} from './byte-string.js';
export type { ByteString } from './byte-string.js';
export { DYN, EHDR, ElfCodec, PHDR, SHDR, SYM } from './codec.js';
export type { DynamicEntry, ProgramHeader } from './codec.js';
export {
  DF_1,
  DF_1_NAMES,
  DF_NAMES,
  DT,
  DT_NAMES,
  EI_NIDENT,
  ELFCLASS32,
  ELFCLASS64,
  ELFDATA2LSB,
  ELFDATA2MSB,
  ELF_MAGIC,
  EM,
  EM_NAMES,
  ET,
  ET_NAMES,
  EV_CURRENT,
  PF_R,
  PF_W,
  PF_X,
  PT,
  SHF_ALLOC,
  SHT,
  flagNames,
  machinePageSize,
  nameOf,
} from './constants.js';
export { CUDA_COMPAT_NOTE_SECTION, cudaCompatNoteRecord, describeCudaCompatNote, readCudaCompatNote } from './cuda-compat-note.js';
export { dlopenNotes } from './dlopen-note.js';
export type { DlopenDependency, DlopenEntry } from './dlopen-note.js';
export type { CudaCompatNote, CudaCompatNoteReading, CudaCompatNoteRecord } from './cuda-compat-note.js';
export { readDynamicSymbols } from './dynamic-symbols.js';
export { ElfFile, withElfFile } from './elf-file.js';
export type { OpenOptions } from './elf-file.js';
export { dynamicStringsOf, dynamicValue, lastDynamicString, readElfImage } from './elf-image.js';
export type { DynamicArray, ElfHeader, ElfImage } from './elf-image.js';
export { KIND_BYTES, fileKind, hasElfMagic } from './file-kind.js';
export { dedupeEntries, joinRunpath, runpathFields, splitRunpath, usesOrigin } from './runpath-list.js';
export { readSectionHeaders } from './section-headers.js';
export type { Section } from './section-headers.js';
export { readStringReferences } from './string-references.js';
export type { StringReference, StringReferences } from './string-references.js';
export { StringTable, stringAt } from './string-table.js';
export { ADDRESS_TAGS, RELOCATABLE_SECTION_TAGS, STRING_TAGS } from './tag-groups.js';
