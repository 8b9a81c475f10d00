#!/usr/bin/env bash
# The bytes `apply` writes over the closure benchmark's tree, as one sha256 line per file: two builds
# that give the same list patch every file of the closure to the same bytes. For a change that must
# not change behaviour (a refactoring), run it with the build before and the build after, and compare.
#
#   bash bench/apply-bytes.sh DIST OUT [APPLY_FLAGS...]
#
# DIST: a build's dist/ folder, inside its checkout (the bundle reads ../../package.json): for the build
# before, `git worktree add /tmp/before REV`, then npm ci and npm run build there; OUT: the list to write.
# APPLY_FLAGS default to the whole CUDA fixup: --cuda-compat C --remove-stubs. Each run patches a fresh
# copy of bench/.cache/closure/tree (bash bench/closure/assemble.sh makes it) at bench/.cache/apply-bytes,
# then removes the copy.
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
tree=${CUDA_PATCHELF_BENCH_CACHE:-$here/.cache/closure}/tree
dist=${1:?usage: bash bench/apply-bytes.sh DIST OUT [APPLY_FLAGS...]}
out=${2:?usage: bash bench/apply-bytes.sh DIST OUT [APPLY_FLAGS...]}
shift 2
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--cuda-compat /nix/store/00000000000000000000000000000000-cuda_compat --remove-stubs)
[ -d "$tree" ] || { echo "apply-bytes: no closure tree at $tree: run bash bench/closure/assemble.sh" >&2; exit 2; }
[ -f "$dist/cli/main.js" ] || { echo "apply-bytes: $dist/cli/main.js is missing: name a build's dist/" >&2; exit 2; }

# Always the same path: with --auto-patchelf the runpaths name directories inside the tree, which two
# runs then write the same. One run at a time (the lock), the copy removed at the end.
work=$here/.cache/apply-bytes
mkdir -p "$here/.cache"
exec 9>"$here/.cache/apply-bytes.lock"
flock 9
rm -rf "$work"
mkdir "$work"
trap 'rm -rf "$work"' EXIT
cp -a "$tree" "$work/tree"
status=0
node "$dist/cli/main.js" apply "$work/tree" --quiet "${flags[@]}" || status=$?
# 3: some files failed, each named on stderr (the same files fail before and after); anything else is
# a run that did not happen.
case $status in 0 | 3) ;; *) echo "apply-bytes: apply exited $status" >&2; exit 1 ;; esac
# Every regular file, by its path in the tree: contents, then mode (a write that changed a mode shows).
(cd "$work/tree" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$out"
(cd "$work/tree" && find . -type f -printf '%m %p\n' | sort) >>"$out"
echo "apply-bytes: apply exited $status; $(grep -c '^[0-9a-f]\{64\} ' "$out") files listed in $out"
