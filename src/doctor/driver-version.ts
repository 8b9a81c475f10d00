// NVIDIA driver versions: the kernel module's (what a libcuda must not be older than when it comes
// from cuda_compat, and must equal otherwise) and how two versions compare.

import { readFileSync } from 'node:fs';

export interface DriverVersion {
  readonly version: string;
  /** Where it was read: a file, or the option that gave it. */
  readonly source: string;
}

const VERSION = /^\d+\.\d+(\.\d+)*$/;

export function isDriverVersion(text: string): boolean {
  return VERSION.test(text);
}

/** Numeric, component by component: 580.159.04 is newer than 580.95.05. */
export function compareDriverVersions(a: string, b: string): number {
  const left = a.split('.').map(Number);
  const right = b.split('.').map(Number);
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    const difference = (left[i] ?? 0) - (right[i] ?? 0);
    if (difference !== 0) return difference;
  }
  return 0;
}

function readSmallFile(path: string): string | null {
  try {
    return readFileSync(path, 'latin1');
  } catch {
    return null;
  }
}

/** The loaded kernel module's version on this machine, or null when no NVIDIA module is loaded. */
export function readKernelDriverVersion(): DriverVersion | null {
  const moduleVersion = readSmallFile('/sys/module/nvidia/version')?.trim();
  if (moduleVersion !== undefined && isDriverVersion(moduleVersion))
    return { version: moduleVersion, source: '/sys/module/nvidia/version' };
  // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Release Build ..."
  const procVersion = /Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)*)/.exec(readSmallFile('/proc/driver/nvidia/version') ?? '')?.[1];
  return procVersion === undefined ? null : { version: procVersion, source: '/proc/driver/nvidia/version' };
}
