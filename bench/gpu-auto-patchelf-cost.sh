#!/usr/bin/env bash
# The cost per file of autoPatchelf alone, on 2 CPUs: the nvidia-* CUDA wheels of this machine's
# PyTorch, their runpaths removed first (as a package's libraries are before the fixup), patched by
# Nixpkgs' auto-patchelf.py and by `cuda-patchelf apply --no-driver --auto-patchelf`, in paired rounds,
# each side pinned to CPUs 0 and 1 (taskset) and each round on a fresh copy. One more run of ours
# writes a V8 CPU profile, to say where its time goes.
#   bash bench/gpu-auto-patchelf-cost.sh OUT_DIR CARRY_DIR        (ROUNDS=3)
# CARRY_DIR as for bench/gpu-auto-patchelf.sh: node.xz, auto-patchelf.py, elftools/, patchelf-0.18/.
set -euo pipefail
out=$1
carry=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/script-start.sh
source "$here/lib/script-start.sh"
scratch /tmp/cuda-patchelf-gpu-cost

# shellcheck source=lib/gpu-driver.sh
source "$here/lib/gpu-driver.sh"
carried_tools "$carry"
pin=(taskset -c 0,1)
log "node $("${cli[0]}" --version), $("$work/bin/patchelf" --version), $(nproc) CPUs, pinned to $("${pin[@]}" nproc)"
stand_in_bintools

pristine="$work/pristine"
mkdir -p "$pristine"
cp -a "$(torch_site)/nvidia" "$pristine/"
elf_files() { find "$1" -type f -exec sh -c 'head -c4 "$1" | grep -q "ELF" && echo "$1"' _ {} \;; }
elf_files "$pristine" >"$work/elf.txt"
while IFS= read -r f; do "$work/bin/patchelf" --remove-rpath "$f"; done <"$work/elf.txt"
log "tree: $(du -sb "$pristine" | cut -f1) bytes, $(find "$pristine" -type f | wc -l) files, $(wc -l <"$work/elf.txt") ELF, runpaths removed"
copy() { rm -rf "$work/tree" && cp -a "$pristine" "$work/tree" && sync; }

libs=(/usr/lib/x86_64-linux-gnu)
anchor() {
  NIX_BINTOOLS=$work/bintools PATH=$work/bin:$PATH PYTHONPATH=$carry/elftools \
    "${pin[@]}" python3 "$carry/auto-patchelf.py" --ignore-missing '*' --paths "$work/tree" --libs "${libs[@]}"
}
ours=(apply --no-driver --auto-patchelf --ignore-missing '*' --libs "${libs[@]}" --interpreter "$interpreter"
  --libc-dir "$libc" "$work/tree")

for round in $(seq "${ROUNDS:-3}"); do
  copy
  timed "anchor-$round" anchor
  copy
  timed "ours-$round" "${pin[@]}" "${cli[@]}" "${ours[@]}"
done
copy
timed "ours-profiled" "${pin[@]}" "${cli[0]}" --cpu-prof --cpu-prof-dir "$work/profile" --cpu-prof-name ours.cpuprofile "${cli[1]}" "${ours[@]}"
gzip -c "$work/profile/ours.cpuprofile" >"$out/ours.cpuprofile.gz"
rm -rf "$work"
