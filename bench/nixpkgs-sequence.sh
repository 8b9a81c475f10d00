#!/usr/bin/env bash
# What Nixpkgs does for a CUDA package output, call for call: each hook is `autoFixElfFiles HOOK`,
# which walks every regular file, keeps ELF files (isELF: the first 4 bytes, read by bash) that
# patchelf can read a runpath from (elfHasDynamicSection: patchelf --print-rpath), and calls the hook
# per file. addDriverRunpath checks isELF again, then runs `patchelf --set-rpath "<driver>/lib:$old"`;
# addCudaCompatRunpath then runs `patchelf --set-rpath "<cuda_compat>/compat:$old"`. Three patchelf
# runs per ELF file per hook, each reading the whole file.
#   nixpkgs-sequence.sh TREE CUDA_COMPAT_DIR        (PATCHELF=/path/to/patchelf to pick another one)
set -u
root=$1
compat=$2
patchelf=${PATCHELF:-patchelf}

isELF() {
  local fn=$1 fd magic
  exec {fd}<"$fn"
  read -r -n 4 -u "$fd" magic
  exec {fd}<&-
  [ "$magic" = $'\177ELF' ]
}
elfHasDynamicSection() { "$patchelf" --print-rpath "$1" >&/dev/null; }

addDriverRunpath() {
  isELF "$1" || return 0
  local old
  old=$("$patchelf" --print-rpath "$1")
  "$patchelf" --set-rpath "/run/opengl-driver/lib:$old" "$1"
}
addCudaCompatRunpath() {
  local old
  old=$("$patchelf" --print-rpath "$1")
  "$patchelf" --set-rpath "$compat/compat:$old" "$1"
}

autoFixElfFiles() {
  local f
  find "$root" -type f -print0 | while IFS= read -rd '' f; do
    if ! isELF "$f" 2>/dev/null; then continue; fi
    if elfHasDynamicSection "$f"; then "$1" "$f"; fi
  done
}

autoFixElfFiles addDriverRunpath
autoFixElfFiles addCudaCompatRunpath
