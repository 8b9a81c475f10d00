#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, a driver, a CUDA compat directory (/usr/local/cuda/compat) and
# PyTorch: make the driver link with `cuda-patchelf link-driver` from the real driver and the real
# compat package, and check it three ways:
# - link-driver links the driver's libcuda, and says why compat was left out (NVIDIA's rule);
# - PyTorch's CUDA closure patched with the driver hook only (--driver-link to that link) starts CUDA
#   on the GPU with LD_LIBRARY_PATH unset, and doctor says all is well;
# - the closure patched with the compat first (--cuda-compat) gets a doctor finding that names
#   NVIDIA's rule, and CUDA fails as predicted.
#   bash bench/gpu-link-driver.sh OUT_DIR
# Needs: node (on PATH, or NODE=), dist/ built (npm run build), python3 with torch.
set -euo pipefail
out=$1
here=$(cd "$(dirname "$0")" && pwd)
compat_src=${COMPAT_DIR:-/usr/local/cuda/compat}
# shellcheck source=lib/script-start.sh
source "$here/lib/script-start.sh"
scratch /tmp/cuda-patchelf-link-driver-gpu

# shellcheck source=lib/gpu-driver.sh
source "$here/lib/gpu-driver.sh"
libcuda=$(driver_libcuda)
log_driver "$libcuda" "$compat_src"
# The compat package as --cuda-compat takes one: the directory whose compat/ holds the libraries.
compat_package=$(dirname "$(realpath "$compat_src")")
"${cli[@]}" print "$(realpath "$compat_src"/libcuda.so.1)" >"$out/print-compat-libcuda.txt"
log "compat note: $(grep 'cuda compat' "$out/print-compat-libcuda.txt" | sed 's/^ *cuda compat *//')"

# The driver through the loader's cache, as on a host without NixOS; where the cache does not list it
# (a container with the driver mounted elsewhere), from libcuda's directory.
dest="$work/opengl-driver"
from=()
set +e
"${cli[@]}" link-driver --dry-run "$dest" >"$out/link-driver-cache.txt" 2>&1
cache_code=$?
set -e
log "link-driver through ld.so.cache: exit $cache_code; $(tail -1 "$out/link-driver-cache.txt")"
[ "$cache_code" = 0 ] || from=(--from "$(dirname "$libcuda")")
"${cli[@]}" link-driver "${from[@]}" --cuda-compat "$compat_package" "$dest" | tee "$out/link-driver.txt"
"${cli[@]}" link-driver --json "${from[@]}" --cuda-compat "$compat_package" "$dest" >"$out/link-driver.json"
log "link-driver: $(grep '^  cuda_compat' "$out/link-driver.txt")"
log "link-driver: $(tail -1 "$out/link-driver.txt")"
log "link-driver: $dest/lib/libcuda.so.1 -> $(readlink "$dest/lib/libcuda.so.1")"
log "link-driver again: $(tail -1 <("${cli[@]}" link-driver "${from[@]}" --cuda-compat "$compat_package" "$dest"))"

pristine="$work/pristine"
copy_torch_closure "$pristine"
for variant in driver-link compat-first; do
  tree="$work/$variant"
  cp -a "$pristine" "$tree"
  hooks=(--driver-link "$dest")
  [ "$variant" = compat-first ] && hooks+=(--cuda-compat "$compat_package")
  "${cli[@]}" apply --quiet "${hooks[@]}" "$tree"
  # torchvision's and torchaudio's extension modules need torch's libraries loaded before them (Python
  # imports torch first), which no runpath of theirs finds: doctor, loading each file alone, says so.
  # The CUDA closure proper is torch, the nvidia wheels and triton.
  parts=()
  for part in torch nvidia triton; do [ -d "$tree/$part" ] && parts+=("$tree/$part"); done
  set +e
  env -u LD_LIBRARY_PATH "${cli[@]}" doctor "${parts[@]}" >"$out/doctor-$variant.txt" 2>&1
  doctor_code=$?
  env -u LD_LIBRARY_PATH "${cli[@]}" doctor "$tree" >"$out/doctor-$variant-whole.txt" 2>&1
  set -e
  log "$variant: doctor over the whole copy (torchvision and torchaudio too): $(grep -oE '^  (error|warning) \([a-z0-9-]+\)' "$out/doctor-$variant-whole.txt" | sort | uniq -c | tr -s ' \n' ' ')"
  log "$variant: doctor (torch, nvidia, triton): exit $doctor_code; $(grep -E '^/.*: [0-9]+ dynamic ELF' "$out/doctor-$variant.txt" | tr '\n' ' ')"
  log "$variant: doctor findings: $(grep -oE '^  (error|warning) \([a-z0-9-]+\)' "$out/doctor-$variant.txt" | sort | uniq -c | tr -s ' \n' ' ')"
  grep -m1 -A1 'error (cuda-803)\|error (compat-branch-unlisted)' "$out/doctor-$variant.txt" >>"$out/summary.txt" || true
  log "$variant: torch: $(start_cuda "$tree")"
  log "$variant: gpu check, LD_LIBRARY_PATH unset: $(env -u LD_LIBRARY_PATH bash -c "$(declare -f gpu_check); gpu_check '$tree'" 2>&1 | tail -1)"
done
rm -rf "$work"
