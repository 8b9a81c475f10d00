# shellcheck shell=bash
# What the benchmark scripts that keep a summary do first (sourced, not run): the sourcing script has set
# $here (its own directory) and $out, which is made here.
mkdir -p "$out"

# node: $NODE, or the node on PATH; cli: this checkout's built CLI, run by it.
node=${NODE:-node}
cli=("$node" "$here/../dist/cli/main.js")

# log LINE...: prints the line and appends it to $out/summary.txt.
log() { printf '%s\n' "$*" | tee -a "$out/summary.txt"; }

# scratch DIR: the scratch directory $work, $WORK or else DIR, made empty.
scratch() {
  work=${WORK:-$1}
  rm -rf "$work" && mkdir -p "$work"
}
