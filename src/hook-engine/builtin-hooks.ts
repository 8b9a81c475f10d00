// The built-in hooks: what Nixpkgs' autoAddDriverRunpath, autoAddCudaCompatRunpath and the stubs
// clean-up do to a runpath.

import { asciiByteString, type ByteString, byteStringToText, concatByteStrings } from '../elf/byte-string.js';
import { EM } from '../elf/constants.js';
import type { Hook } from './hook.js';
import { NIXPKGS_STUBS_PATTERNS } from './stubs-pattern.js';

export const DEFAULT_DRIVER_LINK = '/run/opengl-driver';
const DEFAULT_DRIVER_LINK_BYTES = asciiByteString(DEFAULT_DRIVER_LINK);

const LIB = asciiByteString('/lib');
const LIB_32 = asciiByteString('-32/lib');
const COMPAT = asciiByteString('/compat');

/** The built-in hooks that add entries: constraints may name them whether or not they are turned on. */
export const BUILTIN_HOOK_NAMES: ReadonlySet<string> = new Set(['driver', 'cuda-compat']);

/** The built-in hooks whose entries are the driver's directory: the driver hook, and the stubs replacement. */
export const BUILTIN_DRIVER_HOOK_NAMES: ReadonlySet<string> = new Set(['driver', 'remove-stubs']);

/** The built-in hooks that remove or replace entries: no constraint can name them (they add none to place). */
export const BUILTIN_REMOVAL_HOOK_NAMES: ReadonlySet<string> = new Set(['remove-stubs', 'drop-cuda-compat']);

/**
 * cuda_compat's directories, as shell patterns on whole entries (`*` matches `/` too): the `compat`
 * directory of Nixpkgs' cuda_compat package (`/nix/store/…-cuda12.8-cuda_compat-…/compat`, what the
 * cuda-compat hook adds), and of NVIDIA's cuda-compat packages (`/usr/local/cuda-12.8/compat`).
 */
export const CUDA_COMPAT_PATTERNS: readonly ByteString[] = ['*cuda_compat*/compat', '*cuda-compat*/compat', '*/cuda*/compat'].map(
  asciiByteString,
);

/**
 * `driver`: prepends `<driverLink>/lib`. Nixpkgs uses `/run/opengl-driver-32` on i686; here the choice
 * is made per file, so that i386 files in a mixed tree get the 32-bit link.
 */
export function driverHook(driverLink: ByteString = DEFAULT_DRIVER_LINK_BYTES): Hook {
  return {
    name: 'driver',
    transform: { kind: 'prepend', dirs: [concatByteStrings(driverLink, LIB)] },
    machineDirs: driverMachineDirs(driverLink),
    files: {},
    precedes: [],
    follows: [],
  };
}

/**
 * `cuda-compat`: prepends `<cudaCompat>/compat`, before the driver's entry: the compat libcuda must be
 * found before the system driver's. Never applied to cuda_compat itself.
 */
export function cudaCompatHook(cudaCompat: ByteString): Hook {
  return {
    name: 'cuda-compat',
    transform: { kind: 'prepend', dirs: [concatByteStrings(cudaCompat, COMPAT)] },
    // The walk's paths are text: the directory is compared with them as text.
    files: { excludeUnder: [byteStringToText(cudaCompat)] },
    precedes: ['driver'],
    follows: [],
  };
}

/**
 * `drop-cuda-compat`: removes cuda_compat's directories (CUDA_COMPAT_PATTERNS). A compat libcuda older
 * than the kernel driver stops CUDA with error 803, and a runpath is fixed at build time: this takes it
 * out of a built tree, in the same write as the other hooks. A removal, so it runs after every hook that
 * adds entries.
 */
export function dropCudaCompatHook(): Hook {
  return {
    name: 'drop-cuda-compat',
    transform: { kind: 'remove-pattern', patterns: CUDA_COMPAT_PATTERNS },
    files: {},
    precedes: [],
    follows: [],
  };
}

function driverMachineDirs(driverLink: ByteString): ReadonlyMap<number, readonly ByteString[]> {
  return new Map([[EM.EM_386, [concatByteStrings(driverLink, LIB_32)]]]);
}

/**
 * `remove-stubs`, as Nixpkgs' removeStubsFromRunpathHook: link-time stub libraries (libcuda.so from
 * `lib/stubs`) must never be found at run time, where the driver's library belongs. The first stubs
 * entry becomes the driver's directory unless that came earlier; the other stubs entries are dropped.
 * The driver link is needed even when the driver hook is off, as in Nixpkgs. A replacement runs after
 * every other hook (orderHooks), as Nixpkgs' stubs hook does.
 */
export function removeStubsHook(options: { patterns?: readonly ByteString[]; driverLink?: ByteString } = {}): Hook {
  const driverLink = options.driverLink ?? DEFAULT_DRIVER_LINK_BYTES;
  return {
    name: 'remove-stubs',
    transform: {
      kind: 'replace-matching',
      patterns: options.patterns ?? NIXPKGS_STUBS_PATTERNS,
      dirs: [concatByteStrings(driverLink, LIB)],
    },
    machineDirs: driverMachineDirs(driverLink),
    files: {},
    precedes: [],
    follows: [],
  };
}
