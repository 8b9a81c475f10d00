// The loader's first look at a candidate file (glibc elf/dl-load.c open_verify): a file of another
// class or machine is passed over in silence and the search goes on; a file that is not ELF at all, too
// short, of the other byte order or not loadable stops the whole load with an error.

import type { Stats } from 'node:fs';
import {
  type ByteString,
  EHDR,
  EI_NIDENT,
  ELFCLASS32,
  ELFCLASS64,
  ElfCodec,
  ELFDATA2LSB,
  ELFDATA2MSB,
  EM_NAMES,
  ET,
  EV_CURRENT,
  FileByteSource,
  hasElfMagic,
  nameOf,
  PHDR,
} from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';
import { describeFileType } from '../errors/io-error.js';
import type { MachineAbi } from './machine-abi.js';
import type { SystemRoot } from './system-root.js';

const ELFOSABI_SYSV = 0;
const ELFOSABI_GNU = 3;
/** LIBC_ABI_MAX: GNU objects may carry ABI versions below it (unique symbols, ifuncs…). */
const GNU_ABI_VERSION_LIMIT = 4;

export type Verdict =
  /** The loader would use this file. */
  | { readonly kind: 'usable'; readonly hostPath: string; readonly stats: Stats }
  /** Passed over, as a missing file is; `errno` is what the loader's open left behind. */
  | { readonly kind: 'passed-over'; readonly errno: string; readonly reason: string | null }
  /** The loader gives up on the whole load with this message. */
  | { readonly kind: 'fatal'; readonly message: string };

function errnoOf(error: unknown): string {
  const cause = error instanceof CudaPatchelfError ? error.cause : error;
  return (cause as NodeJS.ErrnoException | undefined)?.code ?? 'EIO';
}

/** The identification checks in glibc's order; null when e_ident is what this loader expects. */
function identVerdict(ident: Uint8Array, abi: MachineAbi, littleEndian: boolean): Verdict | null {
  const magicOk = hasElfMagic(ident);
  const elfClass = abi.elfClass === 64 ? ELFCLASS64 : ELFCLASS32;
  const osabi = ident[7] ?? 0;
  const abiVersion = ident[8] ?? 0;
  const abiVersionOk = abiVersion === 0 || (osabi === ELFOSABI_GNU && abiVersion < GNU_ABI_VERSION_LIMIT);
  const paddingOk = ident.subarray(9, EI_NIDENT).every((byte) => byte === 0);
  if (
    magicOk &&
    ident[4] === elfClass &&
    ident[5] === (littleEndian ? ELFDATA2LSB : ELFDATA2MSB) &&
    ident[6] === EV_CURRENT &&
    (osabi === ELFOSABI_SYSV || osabi === ELFOSABI_GNU) &&
    abiVersionOk &&
    paddingOk
  ) {
    return null;
  }
  if (!magicOk) return { kind: 'fatal', message: 'invalid ELF header' };
  if (ident[4] !== elfClass)
    return { kind: 'passed-over', errno: 'ENOENT', reason: `ELFCLASS${ident[4] === ELFCLASS64 ? 64 : 32}, not ELFCLASS${abi.elfClass}` };
  if (ident[5] !== (littleEndian ? ELFDATA2LSB : ELFDATA2MSB))
    return { kind: 'fatal', message: `ELF file data encoding not ${littleEndian ? 'little' : 'big'}-endian` };
  if (ident[6] !== EV_CURRENT) return { kind: 'fatal', message: 'ELF file version ident does not match current one' };
  if (osabi !== ELFOSABI_SYSV && osabi !== ELFOSABI_GNU) return { kind: 'fatal', message: 'ELF file OS ABI invalid' };
  if (!abiVersionOk) return { kind: 'fatal', message: 'ELF file ABI version invalid' };
  return { kind: 'fatal', message: 'nonzero padding in e_ident' };
}

/** Linux's device numbers of /dev/null and /dev/zero (1:3, 1:5). */
const NULL_DEVICE = 0x103;
const ZERO_DEVICE = 0x105;

/**
 * A device, FIFO or socket where a library is looked for. The loader opens and reads it as a file:
 * /dev/null reads nothing, /dev/zero zeros; doctor reads no device itself, so another one is called
 * the end of the load without the loader's words. A FIFO's open waits for a writer; a socket's fails.
 */
function specialFileVerdict(stats: Stats): Verdict {
  if (stats.isSocket()) return { kind: 'passed-over', errno: 'ENXIO', reason: null };
  if (stats.isFIFO()) return { kind: 'fatal', message: "a FIFO: the loader's open of it waits for a writer" };
  if (stats.isCharacterDevice() && stats.rdev === NULL_DEVICE) return { kind: 'fatal', message: 'file too short' };
  if (stats.isCharacterDevice() && stats.rdev === ZERO_DEVICE) return { kind: 'fatal', message: 'invalid ELF header' };
  return { kind: 'fatal', message: `${describeFileType(stats)}, which the loader reads as a library and fails on` };
}

/**
 * The header fields the loader checks before it maps a file: what open_verify reads of it. `ident` is
 * e_ident as it is in the file; the other fields as the file's own class and byte order decode them.
 */
export interface HeaderCheck {
  readonly ident: Uint8Array;
  readonly e_version: number;
  readonly e_machine: number;
  readonly e_type: number;
  readonly e_phentsize: number;
  readonly e_phoff: number;
  readonly e_phnum: number;
}

/**
 * open_verify's checks after the identification, in glibc's order, on a file of `size` bytes whose
 * e_ident this loader accepts (identVerdict). The header is the file's own decoding, which is the
 * loader's once the class and byte order match.
 */
function headerVerdict(header: HeaderCheck, size: number, abi: MachineAbi, littleEndian: boolean): Verdict | null {
  const identity = identVerdict(header.ident, abi, littleEndian);
  if (identity !== null) return identity;
  if (header.e_version !== EV_CURRENT) return { kind: 'fatal', message: 'ELF file version does not match current one' };
  if (header.e_machine !== abi.machine)
    return { kind: 'passed-over', errno: 'ENOENT', reason: `${nameOf(EM_NAMES, header.e_machine)}, not ${abi.name}` };
  if (header.e_type !== ET.ET_DYN && header.e_type !== ET.ET_EXEC)
    return { kind: 'fatal', message: 'only ET_DYN and ET_EXEC can be loaded' };
  if (header.e_phentsize !== new ElfCodec(abi.elfClass, littleEndian).sizeOf(PHDR))
    return { kind: 'fatal', message: "ELF file's phentsize not the expected size" };
  // The program header table is read next; a file that ends before it fails that read.
  if (header.e_phnum > 0 && header.e_phoff + header.e_phnum * header.e_phentsize > size)
    return { kind: 'fatal', message: 'cannot read file data' };
  return null;
}

/** The header check of a file's first bytes, decoded with the codec of the class and byte order this loader expects. */
async function readHeaderCheck(source: FileByteSource, abi: MachineAbi, littleEndian: boolean): Promise<HeaderCheck | Verdict> {
  const codec = new ElfCodec(abi.elfClass, littleEndian);
  const headerSize = EI_NIDENT + codec.sizeOf(EHDR);
  if (source.size < headerSize) return { kind: 'fatal', message: 'file too short' };
  const bytes = await source.read(0, headerSize, 'ELF header');
  // A file of another class or byte order is answered by its identification alone.
  const identity = identVerdict(bytes, abi, littleEndian);
  if (identity !== null) return identity;
  return { ident: bytes.subarray(0, EI_NIDENT), ...codec.decode(EHDR, bytes, EI_NIDENT) };
}

/** A file of the emulated system, found and stat'ed: what `path` names, as root.lookUp found it. */
export interface FoundFile {
  readonly hostPath: string;
  readonly stats: Stats;
}

/**
 * What the loader of `abi` makes of a regular file it found (`known`: the header check of a file already
 * read, as ObjectFacts keep it; otherwise the file is opened and its header read).
 */
export async function verifyFile(found: FoundFile, known: HeaderCheck | null, abi: MachineAbi, littleEndian: boolean): Promise<Verdict> {
  if (known !== null) {
    const codec = new ElfCodec(abi.elfClass, littleEndian);
    if (found.stats.size < EI_NIDENT + codec.sizeOf(EHDR)) return { kind: 'fatal', message: 'file too short' };
    return headerVerdict(known, found.stats.size, abi, littleEndian) ?? { kind: 'usable', ...found };
  }
  let source: FileByteSource;
  try {
    source = FileByteSource.open(found.hostPath);
  } catch (error) {
    // A file that cannot be opened is passed over like a missing one; only a failed read is fatal.
    return { kind: 'passed-over', errno: errnoOf(error), reason: null };
  }
  try {
    const header = await readHeaderCheck(source, abi, littleEndian);
    if ('kind' in header) return header;
    return headerVerdict(header, source.size, abi, littleEndian) ?? { kind: 'usable', ...found };
  } finally {
    source.close();
  }
}

/** What the loader makes of what `path` names before it reads the file: nothing there, a directory, a device. */
export function verifyPath(root: SystemRoot, path: ByteString): Exclude<Verdict, { kind: 'usable' }> | FoundFile {
  const found = root.lookUp(path);
  if (!found.ok) return { kind: 'passed-over', errno: found.code, reason: null };
  // open(O_RDONLY) succeeds on a directory; the read of the header then fails with EISDIR.
  if (found.stats.isDirectory()) return { kind: 'fatal', message: 'cannot read file data: Is a directory' };
  if (!found.stats.isFile()) return specialFileVerdict(found.stats);
  return { hostPath: found.hostPath, stats: found.stats };
}
