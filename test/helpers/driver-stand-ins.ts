// Stand-ins for the NVIDIA driver's user-space libraries and for cuda_compat packages, built with gcc
// and laid out as the real ones are: each library is lib….so.VERSION with its soname linked to it
// (libcuda.so.1 -> libcuda.so.580.159.04, and libcuda.so -> libcuda.so.1), and a compat libcuda carries
// `.note.cuda.fwd_compatibility` (an SHT_NOTE section in the first PT_LOAD, owner "NVIDIA Corporation",
// type 0, the JSON description), as NVIDIA's does. Each library's stand_in_version() returns
// "NAME VERSION LABEL", so a program that calls it says which file the loader gave it. A libcuda has
// more than 1 MiB of code, as doctor tells the driver from a link-time stub by its size.

import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { compileProgram } from './compile.js';
import { compilerFor, requireTool } from './fixtures.js';
import { mustExec } from './exec.js';
import { inMountNamespace } from './mount-namespace.js';

/** The note of the compat libcuda 580.95.05 on the H200 (CUDA 13.0). */
export const NOTE_580 = {
  format: 1,
  'CUDA version': '13.0',
  driver: [535, 550, 565, 570, 575, 580],
  device: [1, 2, 7, 8, 9, 10, 11, 12, 13, 14],
};

/** A driver release's libraries as NVIDIA names them: the file's name without .so.VERSION, and the soname. */
const DRIVER_LIBRARIES = [
  ['libcuda', 'libcuda.so.1'],
  ['libnvidia-ml', 'libnvidia-ml.so.1'],
  ['libnvidia-ptxjitcompiler', 'libnvidia-ptxjitcompiler.so.1'],
  ['libnvidia-nvvm', 'libnvidia-nvvm.so.4'],
  ['libcudadebugger', 'libcudadebugger.so.1'],
] as const;

/** What a cuda_compat package's compat/ holds: the driver's libraries but NVML, which talks to the kernel module. */
const COMPAT_LIBRARIES = DRIVER_LIBRARIES.filter(([name]) => name !== 'libnvidia-ml');

/** The note as gas writes it: namesz, descsz, type 0, the owner and the description, 4-byte aligned. */
function noteAssembly(json: string): string {
  const text = json.replace(/\\/g, '\\\\').replace(/"/g, '\\"');
  return [
    '  .section .note.cuda.fwd_compatibility,"a",@note',
    '  .p2align 2',
    '  .long 19',
    '  .long 2f - 1f',
    '  .long 0',
    '  .asciz "NVIDIA Corporation"',
    '  .p2align 2',
    `1: .asciz "${text}"`,
    '2: .p2align 2',
  ].join('\n');
}

export interface StandIn {
  /** The directory, the library's name without .so.VERSION, and its soname. */
  readonly dir: string;
  readonly name: string;
  readonly soname: string;
  readonly version: string;
  /** "driver" or "compat", in what stand_in_version() returns. */
  readonly label: string;
  /** The JSON of the compat note, or null for none. */
  readonly note: string | null;
  /** A libcuda with a few bytes of code, as a link-time stub has (by default a libcuda has the driver's size). */
  readonly small?: boolean;
}

/** DIR/NAME.so.VERSION, built with gcc, and its soname linked to it; returns the file's path. */
export async function buildStandIn(library: StandIn): Promise<string> {
  const { dir, name, soname, version, label, note, small } = library;
  await mkdir(dir, { recursive: true });
  // The sources beside the directory, not in it: the directory holds what the real one holds.
  await mkdir(`${dir}.src`, { recursive: true });
  const base = join(`${dir}.src`, `${name}-${version}`);
  await writeFile(`${base}.c`, `const char *stand_in_version(void) { return "${name} ${version} ${label}"; }\n`);
  const assembly = [
    '  .section .note.GNU-stack,"",@progbits',
    // The driver's code is tens of MiB; doctor calls a libcuda with less than 1 MiB a stub.
    ...(name === 'libcuda' && small !== true ? ['  .section .text.stand_in_code,"ax",@progbits', '  .skip 1200000'] : []),
    ...(note === null ? [] : [noteAssembly(note)]),
  ];
  await writeFile(`${base}.s`, `${assembly.join('\n')}\n`);
  const file = join(dir, `${name}.so.${version}`);
  await mustExec(compilerFor('x86_64'), ['-shared', '-fPIC', '-O1', '-o', file, `-Wl,-soname,${soname}`, `${base}.c`, `${base}.s`]);
  await symlink(`${name}.so.${version}`, join(dir, soname));
  return file;
}

/** DIR holding a driver release's libraries, as the driver installs them (libcuda.so too). */
export async function driverRelease(dir: string, version: string): Promise<string> {
  for (const [name, soname] of DRIVER_LIBRARIES) await buildStandIn({ dir, name, soname, version, label: 'driver', note: null });
  await symlink('libcuda.so.1', join(dir, 'libcuda.so'));
  return dir;
}

/** ROOT/compat holding a cuda_compat package of `version`, its libcuda with the note `note` (an object, JSON text, or null: none). */
export async function compatPackage(root: string, version: string, note: object | string | null): Promise<string> {
  const dir = join(root, 'compat');
  const json = note === null ? null : typeof note === 'string' ? note : JSON.stringify(note);
  for (const [name, soname] of COMPAT_LIBRARIES)
    await buildStandIn({ dir, name, soname, version, label: 'compat', note: name === 'libcuda' ? json : null });
  await symlink('libcuda.so.1', join(dir, 'libcuda.so'));
  return root;
}

/** The note `NOTE_580` with other driver branches: a compat package of another release. */
export function noteListing(driver: readonly number[], cudaVersion = '13.0'): object {
  return { ...NOTE_580, 'CUDA version': cudaVersion, driver };
}

/** Two cuda_compat packages to choose between, one older than the driver 580.159.04 and one newer. */
export interface CompatReleases {
  /** DIR/cuda_compat-580: 580.95.05, the H200's, with NOTE_580. */
  readonly older: string;
  /** DIR/cuda_compat-590: 590.44.01 (CUDA 13.1), its note listing the branches 570 to 590. */
  readonly newer: string;
}

export async function compatReleases(dir: string): Promise<CompatReleases> {
  const older = await compatPackage(join(dir, 'cuda_compat-580'), '580.95.05', NOTE_580);
  const newer = await compatPackage(join(dir, 'cuda_compat-590'), '590.44.01', noteListing([570, 575, 580, 590], '13.1'));
  return { older, newer };
}

/** A program at `path` that needs libcuda.so.1 (linked against `libcuda`), found through DT_RUNPATH `runpath`, and prints whose it got. */
export async function libcudaProbe(path: string, libcuda: string, runpath: string): Promise<string> {
  await writeFile(
    `${path}.c`,
    '#include <stdio.h>\nconst char *stand_in_version(void);\nint main(void) { puts(stand_in_version()); return 0; }\n',
  );
  return compileProgram(path, `${path}.c`, { needs: [libcuda], runpath });
}

/** A loader cache at `cache` as ldconfig writes it, of the system's directories and `dirs` (no links made in them). */
export async function loaderCache(cache: string, dirs: readonly string[]): Promise<string> {
  const conf = `${cache}.conf`;
  await writeFile(conf, `${dirs.join('\n')}\n`);
  await mustExec(requireTool('ldconfig'), ['-X', '-C', cache, '-f', conf]);
  return cache;
}

export interface StandInMachine {
  /** Bound over /etc/ld.so.cache. */
  readonly cache?: string;
  /** Written to /sys/module/nvidia/version (a tmpfs over /sys/module); absent: no NVIDIA module loaded. */
  readonly kernel?: string;
  /** An empty /run (a tmpfs), where a boot makes /run/opengl-driver. */
  readonly emptyRun?: boolean;
}

/**
 * A command prefix that runs what follows in a mount namespace of its own where the machine has this
 * loader cache and this kernel driver: what link-driver and the loader read, without touching the
 * machine's own.
 */
export function onMachine(machine: StandInMachine): string[] {
  const steps = [
    ...(machine.cache === undefined ? [] : ['mount --bind "$CACHE" /etc/ld.so.cache']),
    // The machine's own NVIDIA module, where it has one, is hidden: both places its version is read from.
    'mount -t tmpfs none /sys/module',
    'if [ -d /proc/driver ]; then mount -t tmpfs none /proc/driver; fi',
    ...(machine.kernel === undefined ? [] : ['mkdir /sys/module/nvidia', 'printf "%s\\n" "$KERNEL" > /sys/module/nvidia/version']),
    ...(machine.emptyRun === true ? ['mount -t tmpfs none /run'] : []),
  ];
  return [requireTool('env'), `CACHE=${machine.cache ?? ''}`, `KERNEL=${machine.kernel ?? ''}`, ...inMountNamespace(steps)];
}
