#!/usr/bin/env bash
# What Nixpkgs does for a CUDA package output: autoFixElfFiles walks every regular file, keeps ELF
# files that patchelf can read a runpath from (elfHasDynamicSection), and each hook runs
# `patchelf --set-rpath "<dir>:$old"`: first addDriverRunpath, then addCudaCompatRunpath.
#   nixpkgs-sequence.sh TREE CUDA_COMPAT_DIR        (PATCHELF=/path/to/patchelf to pick another one)
set -u
root=$1
compat=$2
patchelf=${PATCHELF:-patchelf}
isELF() { [ "$(head -c4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }
for dir in /run/opengl-driver/lib "$compat/compat"; do
  find "$root" -type f -print0 | while IFS= read -r -d '' f; do
    isELF "$f" || continue
    old=$("$patchelf" --print-rpath "$f" 2>/dev/null) || continue
    "$patchelf" --set-rpath "$dir:$old" "$f"
  done
done
