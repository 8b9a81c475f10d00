#!/usr/bin/env bash
# On a machine with PyTorch (and its CUDA wheels): two builds of cuda-patchelf, side by side, on
# fresh copies of PyTorch's closure, in alternating order: `apply` with 16, 8 (the default on 16
# CPUs) and 1 thread; the floor (read the first 4 KiB of every file, 16 processes); start-up
# (`node -e 0` against `add-runpath` on a fresh copy of the closure's libcublasLt, five of each per
# round); a CPU profile of one `apply --jobs 1` per build; and a GPU check of the closure the second
# build patched.
#   bash bench/gpu-compare-builds.sh OUT_DIR BEFORE_DIST AFTER_DIST [RUNS]
# Needs: node (on PATH, or NODE=), python3 with torch. The profiles are left in OUT_DIR/profile-*/
# (summarize them with bench/lib/cpu-profile.ts).
set -euo pipefail
out=$1
builds=(before "$2" after "$3")
runs=${4:-5}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/script-start.sh
source "$here/lib/script-start.sh"
scratch /tmp/cuda-patchelf-compare

# shellcheck source=lib/gpu-driver.sh
source "$here/lib/gpu-driver.sh"
driver="$work/opengl-driver"
make_driver_link "$driver" "$(driver_libcuda)"
compat="$work/cuda_compat"
mkdir -p "$compat/compat"
pristine="$work/pristine"
copy_torch_closure "$pristine"
cublaslt=$(find "$pristine" -name 'libcublasLt.so*' -type f | head -1)
log "closure: $(du -sb "$pristine" | cut -f1) bytes, $(find "$pristine" -type f | wc -l) files; libcublasLt: $(stat -c %s "$cublaslt") bytes"
log "node: $("$node" --version), $(nproc) CPUs"

copy() { rm -rf "$work/tree" && cp -a "$pristine" "$work/tree" && sync; }
# shellcheck source=lib/wall-time.sh
source "$here/lib/wall-time.sh"
declare -A samples=()
record() { samples[$1]="${samples[$1]:-} $2"; }

for _ in $(seq "$runs"); do
  for ((i = 0; i < ${#builds[@]}; i += 2)); do
    name=${builds[i]} dist=${builds[i + 1]}
    for jobs in 16 8 1; do
      copy
      record "$name apply --jobs $jobs" "$(ms "$node" "$dist/cli/main.js" apply --jobs "$jobs" --driver-link "$driver" --cuda-compat "$compat" "$work/tree")"
    done
    # Start-up is a few tens of ms against a spread as large: several samples per round.
    for _ in 1 2 3 4 5; do
      cp "$cublaslt" "$work/lt.so" && sync
      record "node -e 0" "$(ms "$node" -e 0)"
      record "$name add-runpath libcublasLt" "$(ms "$node" "$dist/cli/main.js" add-runpath /run/opengl-driver/lib "$work/lt.so")"
    done
  done
  copy
  record "floor: first 4 KiB of every file, 16 processes" "$(ms bash -c "find '$work/tree' -type f -print0 | xargs -0 -P16 -n256 head -qc4096")"
done
for key in "${!samples[@]}"; do
  # shellcheck disable=SC2086 # the samples are words
  log "$key: median $(median ${samples[$key]}) ms of$(printf ' %s' ${samples[$key]})"
done | sort

for ((i = 0; i < ${#builds[@]}; i += 2)); do
  name=${builds[i]} dist=${builds[i + 1]}
  copy
  "$node" --cpu-prof --cpu-prof-dir="$out/profile-$name" "$dist/cli/main.js" apply --jobs 1 --driver-link "$driver" --cuda-compat "$compat" "$work/tree" >/dev/null
done
log "after's tree, LD_LIBRARY_PATH unset: $(env -u LD_LIBRARY_PATH PYTHONPATH="$work/tree" python3 -c '
import torch
a = torch.randn(1024, 1024, device="cuda")
print("gpu ok", torch.__version__, torch.cuda.get_device_name(), float((a @ a).sum()) == float((a @ a).sum()))' 2>&1 | tail -1)"
rm -rf "$work"
