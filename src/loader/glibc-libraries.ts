// Which libraries are glibc's own: on Nix the interpreter's directory is glibc's lib/ and holds little
// else, but a Debian or Ubuntu interpreter's directory (/usr/lib/<triplet>) holds every library of the
// system. There, only glibc's own libraries are libc's (rule 2 of docs/auto-patchelf.md): a tree's own
// copy of any other library is never passed over for the system's. doctor leaves glibc's own dlopens
// (libnss_*, libgcc_s) to glibc. Names are byte strings, compared with the ASCII names below.

import type { ByteString } from '../elf/elf.js';

/** The sonames glibc installs (2.17 to 2.40), besides the dynamic loader; alpha and ia64 name libc and libm `.so.6.1`. */
const GLIBC_SONAMES: ReadonlySet<string> = new Set([
  'libc.so.6',
  'libc.so.6.1',
  'libm.so.6',
  'libm.so.6.1',
  'libmvec.so.1',
  'libpthread.so.0',
  'libdl.so.2',
  'librt.so.1',
  'libutil.so.1',
  'libresolv.so.2',
  'libnsl.so.1',
  'libanl.so.1',
  'libcidn.so.1',
  'libBrokenLocale.so.1',
  'libc_malloc_debug.so.0',
  'libthread_db.so.1',
  'libmemusage.so',
  'libpcprofile.so',
  'libSegFault.so',
  'libnss_compat.so.2',
  'libnss_db.so.2',
  'libnss_dns.so.2',
  'libnss_files.so.2',
  'libnss_hesiod.so.2',
]);

/** The dynamic loader's names: ld-linux-x86-64.so.2, ld-linux-aarch64.so.1, ld-linux.so.2, ld64.so.2, ld.so.1… */
const LOADER = /^ld(?:-linux[-\w]*|64)?\.so\.\d+$/;

/** GCC's unwinder, which Nix's glibc carries in its lib/ (glibc dlopens it for thread cancellation). */
const GLIBC_COMPANION = /^libgcc_s\.so\.\d+$/;

/** Whether a library (by file name) is one glibc installs. */
export function isGlibcLibrary(name: ByteString): boolean {
  return GLIBC_SONAMES.has(name) || LOADER.test(name);
}

/** The link-time names of glibc's libraries (libc.so, libm.so…), which a glibc's lib/ may hold too. */
const GLIBC_LINK_NAMES: ReadonlySet<string> = new Set([...GLIBC_SONAMES].map((soname) => soname.replace(/\.so\..*$/, '.so')));

/**
 * Whether a libc directory, by the names of the libraries (`*.so*`) it holds, holds glibc alone (Nix's
 * glibc lib/, and its companion libgcc_s): then every library in it is libc's, as auto-patchelf.py
 * counts them; otherwise only glibc's own are.
 */
export function holdsOnlyGlibc(libraryNames: Iterable<ByteString>): boolean {
  for (const name of libraryNames) if (!isGlibcLibrary(name) && !GLIBC_LINK_NAMES.has(name) && !GLIBC_COMPANION.test(name)) return false;
  return true;
}
