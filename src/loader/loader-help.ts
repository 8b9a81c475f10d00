// What a glibc loader says about the CPU it runs on, in its own words: `ld.so --help` (glibc 2.33 and
// later) lists the glibc-hwcaps subdirectories in priority order, each marked "supported" when the CPU
// has that level (the loader asks the CPU itself, with cpuid) and "searched" when it will look there,
// and, before glibc 2.37, the legacy hwcap subdirectory names (AT_PLATFORM, tls, the hwcaps). That is
// the list the loader searches; /proc/cpuinfo can disagree with it (a virtual machine that does not
// list a flag its CPU has), so doctor takes it from the loader whenever the loader can run here.

import { execFileSync } from 'node:child_process';
import { asciiByteString, type ByteString, bytesToByteString, sliceByteString, splitByteString } from '../elf/elf.js';

const NEWLINE = asciiByteString('\n');

/** The loader's own words, as byte strings: the names are directory names. */
export interface LoaderCpuView {
  /** glibc-hwcaps subdirectories in the loader's priority order (none on a machine without any). */
  readonly glibcHwcaps: readonly { readonly name: ByteString; readonly supported: boolean; readonly searched: boolean }[];
  /** The legacy hwcap subdirectories (glibc 2.33 to 2.36), or null when the loader lists none. */
  readonly legacy: {
    /** AT_PLATFORM, $PLATFORM's value. */
    readonly platform: ByteString | null;
    /** The hwcap names the loader searches, in the order it prints them (highest bit first). */
    readonly searchedHwcaps: readonly ByteString[];
  } | null;
}

/** The two-space-indented lines after `header`, up to the first line that is not one. */
function section(lines: readonly ByteString[], header: string): ByteString[] | null {
  const start = lines.indexOf(asciiByteString(header));
  if (start < 0) return null;
  const items: ByteString[] = [];
  for (const line of lines.slice(start + 1)) {
    if (!line.startsWith('  ')) break;
    items.push(trimmed(line));
  }
  return items;
}

/** A line without the ASCII white space around it (trim() would take the byte 0xa0 for a space too). */
function trimmed(line: ByteString): ByteString {
  const start = /^[\t\n\v\f\r ]*/.exec(line)?.[0].length ?? 0;
  const end = line.length - (/[\t\n\v\f\r ]*$/.exec(line)?.[0].length ?? 0);
  return sliceByteString(line, start, Math.max(start, end));
}

/** "x86-64-v3 (supported, searched)" as its name and its marks. */
function item(line: ByteString): { name: ByteString; marks: string[] } {
  const match = /^(\S+)(?: \((.*)\))?$/.exec(line);
  // The name is the line's first run of non-space characters, from its start.
  const name = match === null ? line : sliceByteString(line, 0, (match[1] ?? line).length);
  return { name, marks: (match?.[2] ?? '').split(/[;,] */).filter((mark) => mark !== '') };
}

/**
 * The CPU facts of `ld.so --help`'s text (elf/dl-usage.c), or null when it lists no glibc-hwcaps
 * subdirectories at all (glibc before 2.33, or not a glibc loader's help).
 */
export function parseLoaderHelp(text: ByteString): LoaderCpuView | null {
  const lines = splitByteString(text, NEWLINE);
  const hwcaps = lines.some((line) => line === 'No subdirectories of glibc-hwcaps directories are searched.')
    ? []
    : section(lines, 'Subdirectories of glibc-hwcaps directories, in priority order:');
  if (hwcaps === null) return null;
  const legacy = section(lines, 'Legacy HWCAP subdirectories under library search path directories:');
  return {
    glibcHwcaps: hwcaps
      .map(item)
      .map(({ name, marks }) => ({ name, supported: marks.includes('supported'), searched: marks.includes('searched') })),
    legacy:
      legacy === null
        ? null
        : {
            platform: legacy.map(item).find(({ marks }) => marks.includes('AT_PLATFORM'))?.name ?? null,
            searchedHwcaps: legacy
              .map(item)
              .filter(({ name, marks }) => name !== 'tls' && !marks.includes('AT_PLATFORM') && marks.includes('searched'))
              .map(({ name }) => name),
          },
  };
}

/**
 * Runs `LOADER --help` (a loader runs its own help without loading anything) in an empty environment,
 * so that doctor's own GLIBC_TUNABLES or LD_LIBRARY_PATH do not change the answer; the text, or null
 * when it does not run (a loader of another machine, a stub, a file system mounted noexec).
 */
export function runLoaderHelp(hostPath: string): ByteString | null {
  try {
    const output = execFileSync(hostPath, ['--help'], {
      env: {},
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 10_000,
      maxBuffer: 1024 * 1024,
    });
    return bytesToByteString(output);
  } catch {
    return null;
  }
}
