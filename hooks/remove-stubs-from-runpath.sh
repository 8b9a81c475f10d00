# shellcheck shell=bash source-path=SCRIPTDIR
# Setup hook, a drop-in for Nixpkgs' removeStubsFromRunpathHook: in the runpath of every dynamic ELF file of
# every output, the first entry that points into CUDA's link-time stubs (the stand-ins for libcuda.so and
# friends, which must never be found at run time: entries matching *-cuda*/lib/stubs or
# *-cuda*-stubs/lib*) becomes the driver's directory DRIVER_LINK/lib, unless that directory came earlier,
# and the other stubs entries are dropped, after the other hooks; even with the driver hook off. The bytes
# of the dropped strings are zeroed, so that Nix no longer counts the stubs package as a run-time
# dependency. Through the one `cuda-patchelf apply` run that cuda-patchelf-fixup.sh registers in
# postFixupHooks. Off with dontUseRemoveStubsFromRunpath.
#
# As Nixpkgs' hook does, under strictDeps it works only from depsBuildBuild (hostOffset and targetOffset
# -1), and stays out when sourced from any other input list.
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

if [[ ! -v cudaPatchelfHookArgs[remove-stubs] && -n ${strictDeps-} ]] \
  && (( ${hostOffset:-0} != -1 || ${targetOffset:-0} != -1 )); then
  cudaPatchelfLog "the remove-stubs hook stays out: under strictDeps it works from depsBuildBuild only" \
    "(sourced with hostOffset=${hostOffset:-unset} targetOffset=${targetOffset:-unset})"
  return 0
fi
cudaPatchelfUseCli "@cudaPatchelf@"
cudaPatchelfAddHook remove-stubs "@driverLink@" CUDA_PATCHELF_DRIVER_LINK /run/opengl-driver
