# shellcheck shell=bash source-path=SCRIPTDIR
# Setup hook, a drop-in for Nixpkgs' autoAddDriverRunpath: puts DRIVER_LINK/lib (on NixOS
# /run/opengl-driver/lib, where the NVIDIA driver's libcuda.so.1 is) first in the runpath of every dynamic
# ELF file of every output, through the one `cuda-patchelf apply` run that cuda-patchelf-fixup.sh registers
# in postFixupHooks. Off with dontUseAutoAddDriverRunpath.
#
# Filled at install time (makeSetupHook substitutions), or else:
#   @driverLink@         Nixpkgs' addDriverRunpath.driverLink; else $CUDA_PATCHELF_DRIVER_LINK, else /run/opengl-driver
#   @cudaPatchelfFixup@  the path of cuda-patchelf-fixup.sh; else the one next to this file

cudaPatchelfFixupScript="@cudaPatchelfFixup@"
if [[ $cudaPatchelfFixupScript == @*@ ]]; then
  cudaPatchelfFixupScript=$(dirname -- "${BASH_SOURCE[0]}")/cuda-patchelf-fixup.sh
fi
# shellcheck source=cuda-patchelf-fixup.sh
source "$cudaPatchelfFixupScript"
unset cudaPatchelfFixupScript

cudaPatchelfAddHook driver "@driverLink@" CUDA_PATCHELF_DRIVER_LINK /run/opengl-driver
