# shellcheck shell=bash source-path=SCRIPTDIR
# Setup hook, a drop-in for Nixpkgs' autoAddDriverRunpath: puts DRIVER_LINK/lib (on NixOS
# /run/opengl-driver/lib, where the NVIDIA driver's libcuda.so.1 is) first in the runpath of every dynamic
# ELF file of every output, through the one `cuda-patchelf apply` run that cuda-patchelf-fixup.sh registers
# in postFixupHooks. Off with dontUseAutoAddDriverRunpath, or with the deprecated
# dontUseAutoAddOpenGLRunpath (which, as in Nixpkgs, says that it is deprecated). Like Nixpkgs' hook it
# works from any input list (nativeBuildInputs, buildInputs, depsBuildBuild), strictDeps or not.
#
# Filled at install time (makeSetupHook substitutions), or else:
#   @driverLink@         Nixpkgs' addDriverRunpath.driverLink; else $CUDA_PATCHELF_DRIVER_LINK, else /run/opengl-driver
#   @cudaPatchelf@       the cuda-patchelf command; else $CUDA_PATCHELF, else the one on PATH
#   @cudaPatchelfFixup@  the path of cuda-patchelf-fixup.sh; else the one next to this file

cudaPatchelfFixupScript="@cudaPatchelfFixup@"
if [[ $cudaPatchelfFixupScript == @*@ ]]; then
  cudaPatchelfFixupScript=$(dirname -- "${BASH_SOURCE[0]}")/cuda-patchelf-fixup.sh
fi
# shellcheck source=cuda-patchelf-fixup.sh
source "$cudaPatchelfFixupScript"
unset cudaPatchelfFixupScript

cudaPatchelfSayOpenGLSwitch
cudaPatchelfUseCli "@cudaPatchelf@"
cudaPatchelfAddHook driver "@driverLink@" CUDA_PATCHELF_DRIVER_LINK /run/opengl-driver
