#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, a driver and PyTorch: patch a copy of PyTorch's closure (torch,
# the nvidia-* CUDA wheels, triton) with `cuda-patchelf apply` and with the Nixpkgs patchelf
# sequence, then prove the patched copy still works on the GPU and that the driver directory added
# to the runpath is where libcuda is found.
#   bash bench/gpu-torch-closure.sh OUT_DIR [PATCHELF]
# Needs: node (on PATH, or NODE=), dist/ built (npm run build), python3 with torch.
set -euo pipefail
out=$1
patchelf=${2:-patchelf}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/script-start.sh
source "$here/lib/script-start.sh"
scratch /tmp/cuda-patchelf-gpu

# shellcheck source=lib/gpu-driver.sh
source "$here/lib/gpu-driver.sh"
site=$(torch_site)
libcuda=$(driver_libcuda)
log "site-packages: $site"
log "libcuda: $libcuda"
# The driver link the hook adds, as /run/opengl-driver is on NixOS: a directory holding the driver.
driver="$work/opengl-driver"
make_driver_link "$driver" "$libcuda"
compat="$work/cuda_compat"
mkdir -p "$compat/compat"

pristine="$work/pristine"
copy_torch_closure "$pristine"
elfs=$(find "$pristine" -type f -print0 | xargs -0 -P16 -n64 sh -c 'for f; do [ "$(head -c4 "$f" | od -An -tx1 | tr -d " ")" = 7f454c46 ] && echo; done; true' _ | wc -l)
log "closure: $(du -sb "$pristine" | cut -f1) bytes, $(find "$pristine" -type f | wc -l) files, $elfs ELF files"

copy() { rm -rf "$work/tree" && cp -a "$pristine" "$work/tree" && sync; }

log "pristine: $(gpu_check "$pristine" 2>&1 | tail -1)"
log "pristine, LD_LIBRARY_PATH unset: $(env -u LD_LIBRARY_PATH bash -c "$(declare -f gpu_check); gpu_check '$pristine'" 2>&1 | tail -1)"

copy
timed apply-j16 "${cli[@]}" apply --jobs 16 --driver-link "$driver" --cuda-compat "$compat" "$work/tree"
"${cli[@]}" check --driver-link "$driver" --cuda-compat "$compat" "$work/tree" >/dev/null && log "check after apply: exit 0"
log "after apply: $(gpu_check "$work/tree" 2>&1 | tail -1)"
# Which libcuda did the process load, and through which search path? LD_LIBRARY_PATH (set on many
# GPU machines) is searched before any runpath, so it is unset here: the driver link must do the job.
log "after apply, LD_LIBRARY_PATH unset: $(env -u LD_LIBRARY_PATH bash -c "$(declare -f gpu_check); gpu_check '$work/tree'" 2>&1 | tail -1)"
env -u LD_LIBRARY_PATH PYTHONPATH="$work/tree" LD_DEBUG=libs LD_DEBUG_OUTPUT="$out/ld-debug" python3 -c 'import torch; torch.zeros(1, device="cuda")' >/dev/null 2>&1 || true
cat "$out"/ld-debug.* >"$out/ld-debug-libs.txt" && rm -f "$out"/ld-debug.*
grep -A3 "find library=libcuda.so.1" "$out/ld-debug-libs.txt" | head -8 | tee -a "$out/summary.txt" || true
# Every patched shared object still resolves its dependencies (ld.so --list) where the original did.
broken=0
listed=0
while IFS= read -r f; do
  listed=$((listed + 1))
  if ! /lib64/ld-linux-x86-64.so.2 --list "$f" >/dev/null 2>&1; then
    if /lib64/ld-linux-x86-64.so.2 --list "$pristine/${f#"$work/tree/"}" >/dev/null 2>&1; then
      broken=$((broken + 1))
      log "newly broken: $f"
    fi
  fi
done < <(find "$work/tree" -name '*.so*' -type f)
log "ld.so --list: $broken newly broken of $listed shared objects"

copy
timed apply-j1 "${cli[@]}" apply --jobs 1 --driver-link "$driver" --cuda-compat "$compat" "$work/tree"

copy
timed nixpkgs-sequence env PATCHELF="$patchelf" bash "$here/nixpkgs-sequence.sh" "$work/tree" "$compat"
log "after the patchelf sequence: $(gpu_check "$work/tree" 2>&1 | tail -1)"

copy
timed floor-read-4k bash -c "find '$work/tree' -type f -print0 | xargs -0 -P16 -n256 head -qc4096 >/dev/null"
rm -rf "$work"
