# shellcheck shell=bash
# Building a cache part once (sourced by the benchmark assemblers): the sourcing script sets $cache
# and sources fixtures/lib/common.sh (log).

# build_once PART KEY FUNCTION: FUNCTION OUT makes $cache/PART unless its stamp says KEY, into
# PART.tmp first, so that an interrupted run leaves nothing half-made.
build_once() {
  local part=$1 key=$2 fn=$3 dir=$cache/$1
  if [ -f "$dir/.stamp" ] && [ "$(cat "$dir/.stamp")" = "$key" ]; then return 0; fi
  log "building $part"
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  "$fn" "$dir.tmp"
  printf '%s\n' "$key" >"$dir.tmp/.stamp"
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
}
