// FileByteSource on a scratch file of known bytes: small reads are widened to the 4 KiB blocks around
// them and served again from memory, large ones are read as asked, and a file that makes the reader
// visit many places keeps a bounded number of blocks (the reads after that are made as asked). The
// first block is read through one buffer shared by every file and kept whole only for an ELF file.
// A file a walk listed is opened without a stat (FileHead), which is taken as a step of its own
// (statNow); what was read before it is read again after it. What one opening read (its seed) serves
// a later opening of the same file, and only of the same file.

import { mkdirSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { FileByteSource, FileHead, type ReadSeed } from '../../src/elf/byte-source.js';
import { useTempDir } from '../helpers/use-temp-dir.js';

const SIZE = 1024 * 1024 + 123;
const content = Uint8Array.from({ length: SIZE }, (_, i) => (i * 131 + (i >> 12)) & 0xff);
const elfContent = Uint8Array.from({ length: 10_000 }, (_, i) => (i < 4 ? ([0x7f, 0x45, 0x4c, 0x46][i] ?? 0) : (i * 7) & 0xff));
const dir = useTempDir('byte-source');
const at = (name: 'file' | 'elf' | 'short' | 'directory' | 'link' | 'seeded'): string => join(dir(), name);
beforeAll(() => {
  writeFileSync(at('file'), content);
  writeFileSync(at('elf'), elfContent);
  writeFileSync(at('short'), content.subarray(0, 3));
  mkdirSync(at('directory'));
  symlinkSync(at('elf'), at('link'));
});

describe('FileByteSource', () => {
  it('widens a small read to its blocks and serves reads inside them without reading again', async () => {
    const source = FileByteSource.open(at('file'));
    try {
      expect(await source.read(5000, 100, 'a')).toEqual(content.subarray(5000, 5100));
      expect(source.bytesRead).toBe(4096);
      expect(await source.read(4096, 4096, 'b')).toEqual(content.subarray(4096, 8192));
      expect(source.bytesRead).toBe(4096);
      // Across a block boundary: both blocks, in one read.
      expect(await source.read(12000, 500, 'c')).toEqual(content.subarray(12000, 12500));
      expect(source.bytesRead).toBe(4096 + 8192);
      // The last block is cut at the end of the file.
      expect(await source.read(SIZE - 10, 10, 'd')).toEqual(content.subarray(SIZE - 10));
      expect(source.bytesRead).toBe(4096 + 8192 + (SIZE % 4096));
      expect(await source.read(SIZE, 0, 'e')).toEqual(new Uint8Array(0));
    } finally {
      source.close();
    }
  });

  it('reads a large range as asked, and keeps a bounded number of blocks', async () => {
    const source = FileByteSource.open(at('file'));
    try {
      expect(await source.read(100, 20000, 'large')).toEqual(content.subarray(100, 20100));
      expect(source.bytesRead).toBe(20000);
      // One small read in each of 200 blocks: the first 64 are widened to a block, the rest read as asked.
      for (let block = 0; block < 200; block++) {
        const at = block * 4096 + 7;
        expect(await source.read(at, 16, 'record')).toEqual(content.subarray(at, at + 16));
      }
      expect(source.bytesRead).toBe(20000 + 64 * 4096 + 136 * 16);
      // What was kept is still served from memory.
      expect(await source.read(4096 * 10, 4096, 'kept')).toEqual(content.subarray(40960, 45056));
      expect(source.bytesRead).toBe(20000 + 64 * 4096 + 136 * 16);
    } finally {
      source.close();
    }
  });

  it('reads of a large range only the bytes no kept block holds', async () => {
    const source = FileByteSource.open(at('file'));
    try {
      await source.read(5000, 10, 'second block');
      await source.read(13000, 10, 'fourth block');
      expect(source.bytesRead).toBe(8192);
      // [2000, 22000): blocks 1 and 3 come from memory, the three gaps from the file.
      expect(await source.read(2000, 20000, 'large')).toEqual(content.subarray(2000, 22000));
      expect(source.bytesRead).toBe(8192 + 20000 - 8192);
    } finally {
      source.close();
    }
  });

  it('keeps the whole first block of an ELF file, and only the first bytes of another', async () => {
    const elf = FileByteSource.open(at('elf'));
    const other = FileByteSource.open(at('file'));
    try {
      expect(await elf.read(0, 4, 'magic')).toEqual(elfContent.subarray(0, 4));
      expect(await other.read(0, 8, 'magic')).toEqual(content.subarray(0, 8));
      expect([elf.bytesRead, other.bytesRead]).toEqual([4096, 4096]);
      // The ELF file's block outlives the other file's read through the shared buffer.
      expect(await elf.read(64, 2000, 'program headers')).toEqual(elfContent.subarray(64, 2064));
      expect(elf.bytesRead).toBe(4096);
      // The other file kept the 16 bytes a magic number needs: a read past them reads the rest of its block.
      expect(await other.read(0, 16, 'kept')).toEqual(content.subarray(0, 16));
      expect(other.bytesRead).toBe(4096);
      expect(await other.read(100, 50, 'past the kept bytes')).toEqual(content.subarray(100, 150));
      expect(other.bytesRead).toBe(4096 + 4096 - 16);
    } finally {
      elf.close();
      other.close();
    }
  });

  it('refuses a range past the end of the file before reading', async () => {
    const source = FileByteSource.open(at('file'));
    try {
      await expect(source.read(SIZE - 4, 8, 'tail')).rejects.toThrow(/tail .* runs past the end of the file/);
      expect(source.bytesRead).toBe(0);
    } finally {
      source.close();
    }
  });

  describe('a file a walk listed (FileHead)', () => {
    it('tells a file by its first bytes with one read and no stat; after the stat the source reads the first block again', async () => {
      const head = FileHead.openWalked(at('elf'));
      const short = FileHead.openWalked(at('short'));
      try {
        expect(head.firstBytes(8)).toEqual(elfContent.subarray(0, 8));
        expect(short.firstBytes(8)).toEqual(content.subarray(0, 3));
        expect([head.bytesRead, short.bytesRead]).toEqual([4096, 3]);
      } finally {
        short.close();
      }
      // The size comes with the stat, and what is read after it was read after it: the first block
      // is read again, once, and serves the reads after that.
      const elf = head.statNow();
      try {
        expect(elf.stats.size).toBe(10_000);
        expect(await elf.read(100, 1000, 'program headers')).toEqual(elfContent.subarray(100, 1100));
        expect(elf.bytesRead).toBe(8192);
        expect(await elf.read(0, 64, 'ELF header')).toEqual(elfContent.subarray(0, 64));
        expect(elf.bytesRead).toBe(8192);
        expect(elf.size).toBe(10_000);
      } finally {
        elf.close();
      }
    });

    it('refuses a directory when its stat is taken, and a symbolic link at the open', () => {
      const directory = FileHead.openWalked(at('directory'));
      try {
        expect(() => directory.statNow()).toThrow(/not a regular file \(a directory\)/);
      } finally {
        directory.close();
      }
      expect(() => FileHead.openWalked(at('link'))).toThrow(/is a symbolic link now/);
    });
  });

  describe('a seed: what an earlier opening read', () => {
    it('serves the reads it holds from memory when the file is the one it was read from', async () => {
      writeFileSync(at('seeded'), elfContent);
      const first = FileByteSource.open(at('seeded'));
      let seed: ReadSeed;
      try {
        expect(await first.read(0, 64, 'ELF header')).toEqual(elfContent.subarray(0, 64));
        expect(await first.read(5000, 100, 'dynamic array')).toEqual(elfContent.subarray(5000, 5100));
        // Blocks that do not fit the memory left to seeds are not copied: the seed is the file's identity alone.
        expect(first.seed(8191).blocks).toEqual([]);
        seed = first.seed(8192);
      } finally {
        first.close();
      }
      // Each block an array of its own, of its own size: what travels to a worker thread is these bytes alone.
      expect(seed.blocks.map(({ position, bytes }) => [position, bytes.length, bytes.buffer.byteLength])).toEqual([
        [0, 4096, 4096],
        [4096, 4096, 4096],
      ]);
      const second = FileByteSource.open(at('seeded'));
      try {
        expect(second.adoptSeed(seed)).toBe(true);
        expect(await second.read(64, 2000, 'program headers')).toEqual(elfContent.subarray(64, 2064));
        expect(await second.read(4096, 4096, 'second block')).toEqual(elfContent.subarray(4096, 8192));
        expect(second.bytesRead).toBe(0);
        // Past the seed, the file is read as usual.
        expect(await second.read(9000, 100, 'third block')).toEqual(elfContent.subarray(9000, 9100));
        expect(second.bytesRead).toBe(10_000 - 8192);
      } finally {
        second.close();
      }
    });

    it('is refused for a file changed since (its modification time), which is read again as it is now', async () => {
      writeFileSync(at('seeded'), elfContent);
      const first = FileByteSource.open(at('seeded'));
      let seed: ReadSeed;
      try {
        await first.read(0, 64, 'ELF header');
        seed = first.seed(Number.POSITIVE_INFINITY);
      } finally {
        first.close();
      }
      const changed = elfContent.slice();
      changed[100] = 0xee;
      writeFileSync(at('seeded'), changed);
      // The same size, and a modification time set apart from the seed's in case the clock's tick hid the write.
      utimesSync(at('seeded'), new Date(), new Date(seed.identity.mtimeMs + 5000));
      const second = FileByteSource.open(at('seeded'));
      try {
        expect(second.size).toBe(seed.identity.size);
        expect(second.adoptSeed(seed)).toBe(false);
        expect((await second.read(96, 8, 'program headers'))[4]).toBe(0xee);
        expect(second.bytesRead).toBe(4096);
      } finally {
        second.close();
      }
    });
  });
});
