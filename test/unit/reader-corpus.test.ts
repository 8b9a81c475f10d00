// The reader over the committed corpus, file by file against what readelf reads (corpus-table.ts):
// header fields, program headers, and the dynamic entries by their strings.

import { describe, expect, it } from 'vitest';
import { DT } from '../../src/elf/constants.js';
import { dynamicStringsOf, readElfImage } from '../../src/elf/elf-image.js';
import { skipReason } from '../../src/edit/skip-reason.js';
import { MemoryByteSource } from '../helpers/memory-byte-source.js';
import { CORPUS } from './corpus-table.js';
import { corpusBytes, corpusImage } from './helpers/corpus.js';

const only = (values: readonly string[]): string | null => values[0] ?? null;

describe.each(CORPUS)('$name', (file) => {
  it('is small enough to commit', () => {
    expect(corpusBytes(file.name).length).toBeLessThan(16 * 1024);
  });

  it('reads the ELF header', async () => {
    const { codec, header } = await corpusImage(file.name);
    expect({ elfClass: codec.elfClass, littleEndian: codec.littleEndian }).toEqual({
      elfClass: file.elfClass,
      littleEndian: file.littleEndian,
    });
    expect({ machine: header.e_machine, type: header.e_type, entry: header.e_entry, phnum: header.phnum }).toEqual({
      machine: file.machine,
      type: file.type,
      entry: file.entry,
      phnum: file.programHeaders.length,
    });
  });

  it('reads the program headers', async () => {
    const { programHeaders } = await corpusImage(file.name);
    expect(programHeaders.map((ph) => [ph.p_type, ph.p_offset, ph.p_vaddr, ph.p_filesz, ph.p_memsz, ph.p_flags, ph.p_align])).toEqual(
      file.programHeaders,
    );
  });

  it('reads the dynamic array and its strings', async () => {
    const image = await corpusImage(file.name);
    expect(image.debugInfo).toBe(false);
    expect(image.interpreter).toBe(file.interpreter);
    expect(image.dynamic?.entries.length).toBe(file.dynamicEntries);
    expect(image.dynamic?.spareSlots).toBe(file.spareSlots);
    expect(await dynamicStringsOf(image, DT.DT_NEEDED)).toEqual(file.needed);
    expect(only(await dynamicStringsOf(image, DT.DT_SONAME))).toBe(file.soname);
    expect(only(await dynamicStringsOf(image, DT.DT_RUNPATH))).toBe(file.runpath);
    expect(only(await dynamicStringsOf(image, DT.DT_RPATH))).toBe(file.rpath);
    expect(skipReason(image)).toBeNull();
  });

  it('reads a few small ranges, never the whole file', async () => {
    const bytes = corpusBytes(file.name);
    const source = new MemoryByteSource(bytes);
    await readElfImage(source);
    expect(source.bytesRead).toBeLessThan(bytes.length);
  });
});
