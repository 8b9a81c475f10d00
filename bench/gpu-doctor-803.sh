#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, a driver, a CUDA compat directory (/usr/local/cuda/compat) and
# PyTorch: patch two copies of PyTorch's CUDA closure, one with the cuda_compat hook (compat first, as on
# Jetson) and one with the driver hook only; ask `cuda-patchelf doctor` whether CUDA will start in each,
# then start CUDA in each for real, and say whether the prediction and the real result agree.
#   bash bench/gpu-doctor-803.sh OUT_DIR
# Needs: node (on PATH, or NODE=), dist/ built (npm run build), python3 with torch.
set -euo pipefail
out=$1
here=$(cd "$(dirname "$0")" && pwd)
compat_src=${COMPAT_DIR:-/usr/local/cuda/compat}
# shellcheck source=lib/script-start.sh
source "$here/lib/script-start.sh"
scratch /tmp/cuda-patchelf-doctor-gpu

# shellcheck source=lib/gpu-driver.sh
source "$here/lib/gpu-driver.sh"
site=$(torch_site)
libcuda=$(driver_libcuda)
log_driver "$libcuda" "$compat_src"

# The driver link the driver hook adds (/run/opengl-driver on NixOS): a directory holding the driver.
driver="$work/opengl-driver"
make_driver_link "$driver" "$libcuda"
# A cuda_compat package as Nixpkgs lays it out: DIR/compat holds the compat libcuda.
cuda_compat="$work/cuda_compat"
mkdir -p "$cuda_compat"
cp -a "$compat_src" "$cuda_compat/compat"

pristine="$work/pristine"
mkdir -p "$pristine"
for dir in "$site"/torch "$site"/nvidia "$site"/triton; do
  [ -d "$dir" ] && cp -a "$dir" "$pristine/"
done

for variant in compat driver-only; do
  tree="$work/$variant"
  cp -a "$pristine" "$tree"
  hooks=(--driver-link "$driver")
  [ "$variant" = compat ] && hooks+=(--cuda-compat "$cuda_compat")
  "${cli[@]}" apply --quiet "${hooks[@]}" "$tree"
  set +e
  env -u LD_LIBRARY_PATH "${cli[@]}" doctor "$tree" >"$out/doctor-$variant.txt" 2>&1
  doctor_code=$?
  env -u LD_LIBRARY_PATH "${cli[@]}" doctor --json "$tree" >"$out/doctor-$variant.json" 2>/dev/null
  set -e
  real=$(start_cuda "$tree")
  env -u LD_LIBRARY_PATH PYTHONPATH="$tree" LD_DEBUG=libs python3 -c 'import torch; torch.zeros(1, device="cuda")' 2>&1 |
    grep -A4 "find library=libcuda.so.1" | head -6 >"$out/ld-debug-$variant.txt" || true
  predicted=$([ "$doctor_code" = 0 ] && echo "CUDA starts" || echo "problem found (exit $doctor_code)")
  log "$variant: doctor: $predicted; $(tail -1 "$out/doctor-$variant.txt")"
  log "$variant: torch: $real"
  log "$variant: ld.so: $(grep -m1 'trying file=.*libcuda' "$out/ld-debug-$variant.txt" | sed 's/^[[:space:]]*[0-9]*:[[:space:]]*//')"
  case "$doctor_code:$real" in
    0:"cuda ok"*) log "$variant: prediction AGREES (starts)" ;;
    1:"cuda failed"*) log "$variant: prediction AGREES (fails)" ;;
    *) log "$variant: prediction DISAGREES" ;;
  esac
done
rm -rf "$work"
