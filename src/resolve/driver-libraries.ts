// The libraries only the NVIDIA driver ships. A package that needs one finds it at run time through
// the driver hook's runpath entry (`/run/opengl-driver/lib` on NixOS), so the resolver counts it as
// found and adds nothing: no package directory holds the real one, and a copy found in a tree or in
// --libs (the link-time stub `lib/stubs/libcuda.so`) must not be put on the runpath.
//
// Where the names come from:
// - the libraries NVIDIA's container toolkit takes from the host driver into a container
//   (libnvidia-container, src/nvc_info.c: utility_libs, compute_libs, video_libs, graphics_libs,
//   graphics_libs_glvnd, ngx_libs), under the name programs load them by (the driver installs that
//   link beside each `lib….so.<driver version>`);
// - NVIDIA's cuda-compat package (`/usr/local/cuda-X.Y/compat`, Nixpkgs' cuda_compat): libcuda and
//   the three libraries it loads, which the cuda-compat hook's entry provides;
// - Jetson: the L4T driver libraries that Nixpkgs' CUDA packages leave missing for the driver to
//   provide (autoPatchelfIgnoreMissingDeps of cuda_compat, libcudla and tensorrt).
//
// Left out, with the reason (docs/auto-patchelf.md says the same):
// - the driver's internal libraries whose name carries the driver version (libnvidia-glcore.so.<v>,
//   libnvidia-eglcore, -tls, -glsi, -rtcore, -gpucomp, -glvkspirv, -pkcs11, -tileiras): only the
//   driver's own libraries link them, and no fixed name can be listed;
// - libvdpau_nvidia.so.1: Nixpkgs installs it in lib/vdpau/, which the driver hook's entry is not;
// - libGL.so.1, libEGL.so.1, libGLESv2.so.2 (the toolkit's graphics_libs_compat): on Nix, libglvnd's;
// - libnvdla_compiler.so (Jetson): some TensorRT releases ship it in their own tree, which the index
//   must then find.

import { asciiByteString, type ByteString } from '../elf/byte-string.js';

/** The hook whose runpath entry provides a driver library. */
export type DriverLibraryHook = 'driver' | 'cuda-compat';

/** Which of the two hooks are on for this run. */
export interface DriverLibraryHooks {
  readonly driver: boolean;
  readonly cudaCompat: boolean;
}

interface DriverLibrary {
  /** The name a program needs it by (DT_NEEDED, or a `.note.dlopen` soname). */
  readonly name: string;
  /** Also in cuda_compat's `compat/` directory. */
  readonly inCudaCompat: boolean;
  /** Why only the driver (or cuda_compat) has it: the source that lists it, and what it is. */
  readonly why: string;
}

export const DRIVER_LIBRARIES: readonly DriverLibrary[] = [
  { name: 'libcuda.so.1', inCudaCompat: true, why: 'CUDA driver API (compute_libs; cuda-compat)' },
  { name: 'libcuda.so', inCudaCompat: true, why: "libcuda's link-time name, which some programs dlopen (cuda-compat)" },
  { name: 'libcudadebugger.so.1', inCudaCompat: true, why: 'CUDA debugger back end (compute_libs; cuda-compat)' },
  { name: 'libnvidia-ptxjitcompiler.so.1', inCudaCompat: true, why: 'PTX JIT compiler, loaded by libcuda (compute_libs; cuda-compat)' },
  { name: 'libnvidia-nvvm.so.4', inCudaCompat: true, why: "the driver's NVVM, for JIT link-time optimisation (compute_libs; cuda-compat)" },
  { name: 'libnvidia-opencl.so.1', inCudaCompat: false, why: 'OpenCL ICD (compute_libs)' },
  { name: 'libnvidia-allocator.so.1', inCudaCompat: false, why: 'allocator runtime, the GBM back end (compute_libs)' },
  { name: 'libnvidia-ml.so.1', inCudaCompat: false, why: 'NVML, the management library (utility_libs)' },
  { name: 'libnvidia-cfg.so.1', inCudaCompat: false, why: 'GPU configuration (utility_libs)' },
  { name: 'libnvidia-api.so.1', inCudaCompat: false, why: "NvAPI, packaged with the driver's utility libraries" },
  { name: 'libnvcuvid.so.1', inCudaCompat: false, why: 'NVDEC video decoder (video_libs)' },
  { name: 'libnvidia-encode.so.1', inCudaCompat: false, why: 'NVENC video encoder (video_libs)' },
  { name: 'libnvidia-opticalflow.so.1', inCudaCompat: false, why: 'optical flow (video_libs)' },
  { name: 'libnvidia-fbc.so.1', inCudaCompat: false, why: 'framebuffer capture (graphics_libs)' },
  { name: 'libnvoptix.so.1', inCudaCompat: false, why: 'OptiX, which programs dlopen by this name (graphics_libs)' },
  { name: 'libnvidia-ngx.so.1', inCudaCompat: false, why: 'NGX, DLSS (ngx_libs)' },
  { name: 'libGLX_nvidia.so.0', inCudaCompat: false, why: 'OpenGL/GLX vendor library for libglvnd (graphics_libs_glvnd)' },
  { name: 'libEGL_nvidia.so.0', inCudaCompat: false, why: 'EGL vendor library for libglvnd (graphics_libs_glvnd)' },
  { name: 'libGLESv2_nvidia.so.2', inCudaCompat: false, why: 'OpenGL ES 2 vendor library (graphics_libs_glvnd)' },
  { name: 'libGLESv1_CM_nvidia.so.1', inCudaCompat: false, why: 'OpenGL ES 1 vendor library (graphics_libs_glvnd)' },
  { name: 'libnvrm_gpu.so', inCudaCompat: false, why: "Jetson (L4T): GPU resource manager, needed by Jetson's libcuda and cuda_compat" },
  { name: 'libnvrm_mem.so', inCudaCompat: false, why: "Jetson (L4T): memory manager, needed by Jetson's libcuda and cuda_compat" },
  { name: 'libnvdla_runtime.so', inCudaCompat: false, why: "Jetson (L4T): DLA runtime, needed by Jetson's cuda_compat" },
  { name: 'libnvcudla.so', inCudaCompat: false, why: 'Jetson (L4T): the driver side of cuDLA, needed by libcudla' },
  { name: 'libnvos.so', inCudaCompat: false, why: 'Jetson (L4T): the OS layer under libcuda and libnvdla_compiler' },
];

const BY_NAME: ReadonlyMap<ByteString, DriverLibrary> = new Map(
  DRIVER_LIBRARIES.map((library) => [asciiByteString(library.name), library]),
);

/**
 * The hook whose entry provides `name` (a file name, no directory), or null when it is not a driver
 * library or that hook is off. cuda_compat's entry comes first in the composed runpath
 * (`compat:driver:…`), so a library it holds is its.
 */
export function driverLibraryHook(name: ByteString, hooks: DriverLibraryHooks): DriverLibraryHook | null {
  const library = BY_NAME.get(name);
  if (library === undefined) return null;
  if (hooks.cudaCompat && library.inCudaCompat) return 'cuda-compat';
  return hooks.driver ? 'driver' : null;
}
