// The architectures of the fixtures, and what the tests know of each: the machine number, and through
// it the page size a new segment must be aligned to, which is src/'s table (machinePageSize) and not a
// copy of it.

import { EM, machinePageSize } from '../../src/elf/constants.js';

export type Arch = 'x86_64' | 'aarch64' | 'arm' | 'ppc64';
/** The architectures whose code the tests compile and run here (x86_64 natively, aarch64 under qemu-aarch64); arm and ppc64 files are only read and edited. */
export type BuildArch = Extract<Arch, 'x86_64' | 'aarch64'>;
export const BUILD_ARCHES: readonly BuildArch[] = ['x86_64', 'aarch64'];

export function isBuildArch(arch: Arch | null): arch is BuildArch {
  return arch === 'x86_64' || arch === 'aarch64';
}

const MACHINES: Readonly<Record<Arch, number>> = { x86_64: EM.EM_X86_64, aarch64: EM.EM_AARCH64, arm: EM.EM_ARM, ppc64: EM.EM_PPC64 };

/** The architecture of an e_machine value; null for a machine none of the fixtures is built for. */
export function archOfMachine(machine: number): Arch | null {
  return (Object.keys(MACHINES) as Arch[]).find((arch) => MACHINES[arch] === machine) ?? null;
}

/** The page size a loader of the architecture may run with: a new PT_LOAD must be aligned at least to it. */
export function machinePageSizeOf(arch: Arch): number {
  return machinePageSize(MACHINES[arch]);
}
