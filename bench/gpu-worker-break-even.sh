#!/usr/bin/env bash
# Where worker threads start to pay: `apply --dry-run` with one thread and with JOBS threads (and, in
# a build with --threads-from-start, with the pool started with the first file) on parts of PyTorch's
# closure of growing size (a few files to all of it), alternating, several runs each. A dry run plans
# every file and writes nothing, so every run sees the same tree.
#   bash bench/gpu-worker-break-even.sh OUT_DIR [RUNS]      JOBS=8  NODE=node  DIST=dist
# Needs: python3 with torch (for the closure). Writes OUT_DIR/summary.txt.
set -euo pipefail
out=$1
runs=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
dist=${DIST:-$here/../dist}
jobs=${JOBS:-8}
# shellcheck source=lib/script-start.sh
source "$here/lib/script-start.sh"
scratch /tmp/cuda-patchelf-break-even

# shellcheck source=lib/gpu-driver.sh
source "$here/lib/gpu-driver.sh"
closure="$work/closure"
copy_torch_closure "$closure"
log "node: $("$node" --version), $(nproc) CPUs; JOBS=$jobs; median of $runs runs each"

# shellcheck source=lib/wall-time.sh
source "$here/lib/wall-time.sh"

# Parts of the closure, smallest first: the directories holding the most files and the most ELF bytes.
parts=()
for part in torch/bin torch/include/ATen/ops nvidia/cuda_runtime nvidia/cublas torch/lib torch nvidia ""; do
  if [ -z "$part" ] || [ -d "$closure/$part" ]; then parts+=("$closure/$part"); fi
done
# Each setting's arguments; in a build with --threads-from-start, the default start and the pool
# started with the first file are timed apart.
settings=("--jobs 1" "--jobs $jobs")
if "$node" "$dist/cli/main.js" apply --help | grep -q -- --threads-from-start; then settings+=("--jobs $jobs --threads-from-start"); fi
for tree in "${parts[@]}"; do
  line="${tree#"$closure"/}: $(find "$tree" -type f | wc -l) files, $(du -sb "$tree" | cut -f1) bytes"
  declare -A times=()
  for _ in $(seq "$runs"); do
    for setting in "${settings[@]}"; do
      # shellcheck disable=SC2086 # a setting is several words
      times[$setting]="${times[$setting]:-} $(ms "$node" "$dist/cli/main.js" apply --dry-run $setting --cuda-compat /nix/store/0-cuda_compat "$tree")"
    done
  done
  for setting in "${settings[@]}"; do
    # shellcheck disable=SC2086 # the samples are words
    line+="; $setting: median $(median ${times[$setting]}) ms of${times[$setting]}"
  done
  unset times
  log "$line"
done
rm -rf "$work"
