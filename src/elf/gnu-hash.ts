// The GNU hash table (DT_GNU_HASH), read for one thing: how many .dynsym entries it counts. The table
// names no symbol count; the highest bucket's chain ends at the last hashed symbol.

import { dataViewOf } from './byte-source.js';
import { fileOffsetOf, type ElfImage } from './elf-image.js';
import { malformedInput } from '../errors/cuda-patchelf-error.js';

/**
 * Bytes of a GNU hash chain read at a time: the last chain is usually a few entries long, so the
 * first chunk is small (and often inside a block already read); a long one is read in doubling chunks.
 */
const FIRST_CHAIN_CHUNK = 64;
const LARGEST_CHAIN_CHUNK = 4096;

/**
 * The number of symbols the GNU hash table at `address` counts: one past the last symbol of the
 * highest bucket's chain, or symoffset when no bucket names a symbol. Symbols below symoffset (the
 * imports) are counted; symbols after the last hashed one, if any, are not.
 */
export async function gnuHashSymbolCount(image: ElfImage, address: number): Promise<number> {
  const { source, codec, programHeaders } = image;
  const le = codec.littleEndian;
  const headerAt = fileOffsetOf(programHeaders, address, 16, 'GNU hash table (DT_GNU_HASH)');
  const header = dataViewOf(await source.read(headerAt, 16, 'GNU hash table header'));
  const bucketCount = header.getUint32(0, le);
  const symbolOffset = header.getUint32(4, le);
  const bloomWords = header.getUint32(8, le);
  const bucketsAt = headerAt + 16 + bloomWords * codec.wordSize;
  const buckets = dataViewOf(await source.read(bucketsAt, bucketCount * 4, 'GNU hash buckets'));
  let last = 0;
  for (let i = 0; i < bucketCount; i++) last = Math.max(last, buckets.getUint32(i * 4, le));
  if (last < symbolOffset) return symbolOffset;
  // Walk the chain of the highest bucket's symbols until the entry with the end bit, a chunk at a time.
  const chainsAt = bucketsAt + bucketCount * 4;
  for (let symbol = last, chunkSize = FIRST_CHAIN_CHUNK; ; chunkSize = Math.min(2 * chunkSize, LARGEST_CHAIN_CHUNK)) {
    const at = chainsAt + (symbol - symbolOffset) * 4;
    const chunk = await source.read(at, Math.min(chunkSize, source.size - at - ((source.size - at) % 4)), 'GNU hash chain');
    if (chunk.length === 0) throw malformedInput('GNU hash chain runs past the end of the file', at);
    const view = dataViewOf(chunk);
    for (let i = 0; i < chunk.length; i += 4, symbol++) {
      if ((view.getUint32(i, le) & 1) !== 0) return symbol + 1;
    }
  }
}
