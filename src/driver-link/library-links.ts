// The names a driver library is linked under in the driver link, as NixOS' driver package lays them
// out: its soname (libcuda.so.1, what the loader and dlopen ask for), its file name
// (libcuda.so.580.159.04) and the development name (libcuda.so, which some programs dlopen).

import { basename } from 'node:path';
import { byteStringToText, DT, ElfFile } from '../elf/elf.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';

export interface LibraryLinks {
  /** The library's real path. */
  readonly file: string;
  /** The names it is linked under, the soname first. */
  readonly names: readonly string[];
  /** Its machine and ELF class ("62/64"): the libraries of one link are of libcuda's. */
  readonly machine: string;
}

export type LinksReading = { readonly ok: true; readonly links: LibraryLinks } | { readonly ok: false; readonly problem: string };

/** libcuda.so of libcuda.so.580.159.04. */
function developmentName(name: string): string {
  return name.slice(0, name.indexOf('.so.') + '.so'.length);
}

/** The link names of the library at `file` (a real path), read from its dynamic section; why not, for a file that is not one. */
export async function readLibraryLinks(file: string): Promise<LinksReading> {
  const opened = await ElfFile.open(file);
  if (opened.kind !== 'elf') return { ok: false, problem: opened.error.message };
  try {
    const soname = await opened.file.lastDynString(DT.DT_SONAME);
    const name = basename(file);
    const names = [...new Set([...(soname === null ? [] : [byteStringToText(soname)]), name, developmentName(name)])];
    return {
      ok: true,
      links: {
        file,
        names: names.filter((link) => !link.includes('/')),
        machine: `${opened.file.header.e_machine}/${opened.file.image.codec.elfClass}`,
      },
    };
  } catch (error) {
    if (!(error instanceof CudaPatchelfError)) throw error;
    return { ok: false, problem: error.message };
  } finally {
    opened.file.close();
  }
}
