// Which files and libraries go together by machine and OS ABI (e_ident[EI_OSABI]), as Nixpkgs'
// auto-patchelf decides it: the SYSV ABI (0) is the common base every other ABI can use, and two
// specific ABIs go together only when they are the same one.

/** ELFOSABI_NONE, "UNIX - System V": what most Linux files carry, GNU extensions or not. */
const ELFOSABI_SYSV = 0;
/** FreeBSD and OpenBSD package ld.so apart from libc.so, so a file of theirs keeps its libc directory. */
const ELFOSABI_FREEBSD = 9;
const ELFOSABI_OPENBSD = 12;

/**
 * Whether a file of one OS ABI may use a library of the other (and a file may be patched for a target
 * of the other): either is SYSV, or they are equal. Nixpkgs also calls two ABIs compatible when one of
 * them "could not be detected"; pyelftools names every value it does not know by its number, so that
 * never happens on a file it could read, and an unnamed value is compared as a number, as here.
 */
export function osAbisCompatible(a: number, b: number): boolean {
  return a === ELFOSABI_SYSV || b === ELFOSABI_SYSV || a === b;
}

/** The OS ABIs whose files always keep their libc directory in the runpath (the anchor's forced --keep-libc). */
export function libcAlwaysKept(osAbi: number): boolean {
  return osAbi === ELFOSABI_FREEBSD || osAbi === ELFOSABI_OPENBSD;
}

/** An ELF file's e_machine and OS ABI: a file's, or the target's (--interpreter's). */
export interface MachineAndOsAbi {
  readonly machine: number;
  readonly osAbi: number;
}

/** Why the resolver leaves a file alone for this target, or null when it applies. */
export type TargetSkipReason = 'other-machine' | 'incompatible-os-abi';

/** Without a target (no --interpreter) every file is resolved against libraries of its own machine. */
export function targetSkipReason(file: MachineAndOsAbi, target: MachineAndOsAbi | null): TargetSkipReason | null {
  if (target === null) return null;
  if (file.machine !== target.machine) return 'other-machine';
  if (!osAbisCompatible(file.osAbi, target.osAbi)) return 'incompatible-os-abi';
  return null;
}
