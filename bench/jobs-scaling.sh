#!/usr/bin/env bash
# How `cuda-patchelf apply` (driver + cuda_compat hooks) speeds up with the threads it is given: one
# run per --jobs value, each on a fresh copy of the same trees, and (SEQUENCE=1) the Nixpkgs patchelf
# sequence on one more copy in the same run, for the ratio.
#   bash bench/jobs-scaling.sh OUT_DIR TREE...
#   JOBS="1 2 4 8 16"  NODE=node  PATCHELF=patchelf  SEQUENCE=1  WORK=/tmp/cuda-patchelf-jobs
# Needs dist/ built (npm run build) and GNU time. Writes OUT_DIR/summary.txt.
set -euo pipefail
out=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
jobs=${JOBS:-"1 2 4 8 16"}
compat=/nix/store/00000000000000000000000000000000-cuda_compat
# shellcheck source=lib/script-start.sh
source "$here/lib/script-start.sh"
scratch /tmp/cuda-patchelf-jobs
mkdir "$work/pristine"

for tree in "$@"; do cp -a "$tree" "$work/pristine/$(printf '%s' "$tree" | tr / _)"; done
files=$(find "$work/pristine" -type f | wc -l)
log "trees: $*"
log "copy: $(du -sb "$work/pristine" | cut -f1) bytes, $files files; $(nproc) CPUs; $(uname -r); node $("$node" --version)"

fresh() { rm -rf "$work/tree" && cp -a "$work/pristine" "$work/tree" && sync; }

# wall seconds, CPU% (user+system over wall), peak RSS: GNU time's -f fields.
for j in $jobs; do
  fresh
  /usr/bin/time -f "%e %P %M" -o "$work/time" "${cli[@]}" apply --jobs "$j" --cuda-compat "$compat" "$work/tree" >"$out/apply-j$j.log" 2>&1
  read -r wall cpu rss <"$work/time"
  log "apply --jobs $j: ${wall} s, CPU ${cpu}, peak RSS $((rss / 1024)) MiB; $(grep -o '[0-9]* patched' "$out/apply-j$j.log" | head -1)"
done

if [ "${SEQUENCE:-1}" = 1 ]; then
  fresh
  /usr/bin/time -f "%e %P %M" -o "$work/time" env PATCHELF="${PATCHELF:-patchelf}" bash "$here/nixpkgs-sequence.sh" "$work/tree" "$compat" >"$out/nixpkgs-sequence.log" 2>&1
  read -r wall cpu rss <"$work/time"
  log "Nixpkgs sequence ($("${PATCHELF:-patchelf}" --version)): ${wall} s, CPU ${cpu}, peak RSS $((rss / 1024)) MiB"
fi
rm -rf "$work"
