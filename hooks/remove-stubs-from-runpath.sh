# shellcheck shell=bash source-path=SCRIPTDIR
# Setup hook: drops the runpath entries that point into a lib/stubs directory (the link-time stand-ins
# for libcuda.so and friends, which must never be found at run time) from every dynamic ELF file of every
# output, after the other hooks, and zeroes the dropped strings so that Nix no longer counts the stubs
# package as a run-time dependency; through the one `cuda-patchelf apply` run that cuda-patchelf-fixup.sh
# registers in postFixupHooks. Off with dontUseRemoveStubsFromRunpath.
#
# Filled at install time (makeSetupHook substitutions), or else:
#   @cudaPatchelfFixup@  the path of cuda-patchelf-fixup.sh; else the one next to this file

cudaPatchelfFixupScript="@cudaPatchelfFixup@"
if [[ $cudaPatchelfFixupScript == @*@ ]]; then
  cudaPatchelfFixupScript=$(dirname -- "${BASH_SOURCE[0]}")/cuda-patchelf-fixup.sh
fi
# shellcheck source=cuda-patchelf-fixup.sh
source "$cudaPatchelfFixupScript"
unset cudaPatchelfFixupScript

cudaPatchelfAddHook remove-stubs
