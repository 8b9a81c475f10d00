#!/usr/bin/env bash
# How many threads `plan --jobs N` starts, and what they cost: two builds of cuda-patchelf, in turn
# (before, after, before, after, …), on each tree and --jobs value, as whole processes under GNU time.
# Prints per build the median wall time and peak RSS, the exit codes seen, and (from --json) the
# worker threads started. A plan reads every file and writes none, so every run sees the same tree.
#   bash bench/jobs-cap.sh OUT_DIR BEFORE_DIST AFTER_DIST TREE...
#   JOBS="1 2 32 200"  RUNS=5  NODE=node  TIMEOUT=300 (seconds per run)
# A build that cannot take a --jobs value says so with its exit code (2: a usage error; 124: TIMEOUT
# ran out; 133: V8 stopped on a fatal error such as running out of memory). Writes OUT_DIR/summary.txt.
set -euo pipefail
out=$1
builds=(before "$2" after "$3")
shift 3
here=$(cd "$(dirname "$0")" && pwd)
runs=${RUNS:-5}
jobs=${JOBS:-"1 2 32 200"}
limit=${TIMEOUT:-300}
compat=/nix/store/00000000000000000000000000000000-cuda_compat
# shellcheck source=lib/script-start.sh
source "$here/lib/script-start.sh"
# shellcheck source=lib/wall-time.sh
source "$here/lib/wall-time.sh"

log "$(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)); $(uname -r); node $("$node" --version); $runs runs each"
for tree in "$@"; do
  elf=$(find "$tree" -type f -exec sh -c 'head -c4 "$1" | grep -q "^.ELF"' _ {} \; -print | wc -l)
  log "$tree: $(find "$tree" -type f | wc -l) files, $elf ELF, $(du -sb "$tree" | cut -f1) bytes"
  for j in $jobs; do
    declare -A wall=() rss=() codes=()
    for _ in $(seq "$runs"); do
      for ((b = 0; b < ${#builds[@]}; b += 2)); do
        name=${builds[b]}
        code=0
        rm -f "$out/time"
        timeout "$limit" /usr/bin/time -f '%e %M' -o "$out/time" "$node" "${builds[b + 1]}/cli/main.js" plan --jobs "$j" --cuda-compat "$compat" "$tree" >/dev/null 2>&1 || code=$?
        seconds=0 kib=0
        if [ -s "$out/time" ]; then read -r seconds kib < <(tail -1 "$out/time") || true; fi
        wall[$name]="${wall[$name]:-} $(awk -v s="$seconds" 'BEGIN { print int(s * 1000) }')"
        rss[$name]="${rss[$name]:-} $((kib / 1024))"
        codes[$name]="${codes[$name]:-} $code"
      done
    done
    for ((b = 0; b < ${#builds[@]}; b += 2)); do
      name=${builds[b]}
      # One more run for its report, where the timed runs all finished: the threads it started.
      threads=-
      if [ -z "$(tr -d ' 0' <<<"${codes[$name]}")" ]; then
        threads=$("$node" "${builds[b + 1]}/cli/main.js" plan --json --jobs "$j" --cuda-compat "$compat" "$tree" | "$node" -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).workerThreads))')
      fi
      # shellcheck disable=SC2086 # the samples are words
      log "  --jobs $j, $name: wall median $(median ${wall[$name]}) ms of${wall[$name]}; peak RSS median $(median ${rss[$name]}) MiB; exit${codes[$name]}; worker threads $threads"
    done
    unset wall rss codes
  done
done
rm -f "$out/time"
