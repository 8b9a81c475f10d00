# shellcheck shell=bash source-path=SCRIPTDIR
# Setup hook, a drop-in for Nixpkgs' autoAddCudaCompatRunpath (Jetson): puts CUDA_COMPAT/compat, where
# cuda_compat's newer libcuda.so.1 is, first in the runpath of every dynamic ELF file of every output,
# before the driver's directory whatever order the hooks were sourced in, and never into the files of
# cuda_compat itself; through the one `cuda-patchelf apply` run that cuda-patchelf-fixup.sh registers in
# postFixupHooks. Off with dontUseAutoAddCudaCompatRunpath. As Nixpkgs' hook does when cuda_compat is
# null (every platform but Jetson), it does nothing when @cudaCompat@ was filled in with nothing. Like
# Nixpkgs' hook it works from any input list, strictDeps or not.
#
# Filled at install time (makeSetupHook substitutions), or else:
#   @cudaCompat@         the cuda_compat package; else $CUDA_PATCHELF_CUDA_COMPAT (one of them is needed)
#   @cudaPatchelf@       the cuda-patchelf command; else $CUDA_PATCHELF, else the one on PATH
#   @cudaPatchelfFixup@  the path of cuda-patchelf-fixup.sh; else the one next to this file

cudaPatchelfFixupScript="@cudaPatchelfFixup@"
if [[ $cudaPatchelfFixupScript == @*@ ]]; then
  cudaPatchelfFixupScript=$(dirname -- "${BASH_SOURCE[0]}")/cuda-patchelf-fixup.sh
fi
# shellcheck source=cuda-patchelf-fixup.sh
source "$cudaPatchelfFixupScript"
unset cudaPatchelfFixupScript

if [[ -z "@cudaCompat@" ]]; then
  cudaPatchelfLog "cuda_compat is not available: the cuda-compat hook is skipped"
  return 0
fi
cudaPatchelfUseCli "@cudaPatchelf@"
cudaPatchelfAddHook cuda-compat "@cudaCompat@" CUDA_PATCHELF_CUDA_COMPAT
