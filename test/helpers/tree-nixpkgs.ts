// The Nixpkgs sequence that --nixpkgs-compat must match, as a bash script: autoFixElfFiles (every regular
// file with the ELF magic for which `patchelf --print-rpath` succeeds) running addDriverRunpath over the
// whole output, then again running addCudaCompatRunpath — the postFixupHooks of autoAddDriverRunpath and
// autoAddCudaCompatRunpath in that order, each `patchelf --set-rpath "<dir>:$(patchelf --print-rpath f)"`.
// The function bodies follow pkgs/stdenv/generic/setup.sh (isELF),
// pkgs/build-support/setup-hooks/auto-fix-elf-files.sh, pkgs/build-support/add-driver-runpath/setup-hook.sh
// and pkgs/development/cuda-modules/setup-hooks/auto-add-cuda-compat-runpath.sh, with @driverLink@ and
// @libcudaPath@ substituted from the arguments.

import { writeFile } from 'node:fs/promises';
import { requireTool } from './fixtures.js';
import { cleanEnv, execTool, type ExecResult } from './exec.js';

const SCRIPT = String.raw`#!/usr/bin/env bash
# usage: nixpkgs-hooks.sh PATCHELF DRIVER_LINK CUDA_COMPAT_OR_EMPTY OUTPUT...
set -euo pipefail
patchelf=$1
driverLink=$2
cudaCompat=$3
shift 3

isELF() {
    local fn="$1"
    local fd
    local magic
    exec {fd}< "$fn"
    read -r -n 4 -u "$fd" magic || true
    exec {fd}<&-
    if [ "$magic" = $'\177ELF' ]; then return 0; else return 1; fi
}

elfHasDynamicSection() {
    "$patchelf" --print-rpath "$1" >& /dev/null
}

autoFixElfFiles() {
    local fn="$1"
    shift
    find "$@" -type f -print0 | while IFS= read -rd "" f; do
        if ! isELF "$f"; then
            continue
        elif ! elfHasDynamicSection "$f"; then
            continue
        else
            "$fn" "$f"
        fi
    done
}

addDriverRunpath() {
    for file in "$@"; do
        if ! isELF "$file"; then continue; fi
        local origRpath
        origRpath="$("$patchelf" --print-rpath "$file")"
        "$patchelf" --set-rpath "$driverLink/lib:$origRpath" "$file"
    done
}

addCudaCompatRunpath() {
    local libPath="$1"
    local origRpath
    origRpath="$("$patchelf" --print-rpath "$libPath")"
    "$patchelf" --set-rpath "$cudaCompat/compat:$origRpath" "$libPath"
}

autoFixElfFiles addDriverRunpath "$@"
if [ -n "$cudaCompat" ]; then
    autoFixElfFiles addCudaCompatRunpath "$@"
fi
`;

/** Writes the script to `path` and runs it over the outputs with the real patchelf. */
export async function runNixpkgsHooks(
  path: string,
  options: { driverLink: string; cudaCompat: string | null; outputs: readonly string[] },
): Promise<ExecResult> {
  await writeFile(path, SCRIPT, { mode: 0o755 });
  return execTool(requireTool('bash'), [path, requireTool('patchelf'), options.driverLink, options.cudaCompat ?? '', ...options.outputs], {
    env: cleanEnv(),
    timeoutMs: 300_000,
  });
}
