// Which runpath entries are CUDA stub directories. Nixpkgs' removeStubsFromRunpathHook matches entries
// with shell `case` patterns on store-path names; the same patterns, with the same meaning (`*` matches
// any run of characters, `/` included; `?` one character), are the default here.

import { asciiByteString, type ByteString, byteStringToText } from '../elf/byte-string.js';
import { CudaPatchelfError } from '../errors/cuda-patchelf-error.js';

/** Nixpkgs' patterns: a CUDA package's `lib/stubs`, and the `lib` of a CUDA `-stubs` output. */
export const NIXPKGS_STUBS_PATTERNS: readonly ByteString[] = ['*-cuda*/lib/stubs', '*-cuda*-stubs/lib*'].map(asciiByteString);

/**
 * Compiles shell-style patterns into one matcher of whole entries (byte strings both: `?` is one byte). A pattern made of nothing but `*`,
 * `?` and `/` would match every absolute entry and wipe whole runpaths: a usage error, as is an empty one.
 */
export function stubsMatcher(patterns: readonly ByteString[]): (entry: ByteString) => boolean {
  if (patterns.length === 0) throw new CudaPatchelfError('usage', 'no stubs pattern given');
  const sources = patterns.map((pattern) => {
    if (!/[^*?/]/.test(pattern)) {
      throw new CudaPatchelfError(
        'usage',
        `stubs pattern "${byteStringToText(pattern)}" would match every runpath entry; give one that names the stubs ` +
          `directory (default: ${NIXPKGS_STUBS_PATTERNS.map(byteStringToText).join(' ')})`,
      );
    }
    return pattern.replace(/[.*+?^${}()|[\]\\]/g, (char) => (char === '*' ? '[^]*' : char === '?' ? '[^]' : `\\${char}`));
  });
  const regex = new RegExp(`^(?:${sources.join('|')})$`);
  return (entry) => regex.test(entry);
}
