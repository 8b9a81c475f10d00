#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, a driver and PyTorch: the whole CUDA fixup of a copy of PyTorch's
# closure (torch, the nvidia-* CUDA wheels, triton) as Nixpkgs does it, Nixpkgs' auto-patchelf.py and
# then the driver and cuda_compat hooks' patchelf sequence, against one `cuda-patchelf apply
# --auto-patchelf`; then proof on the GPU that the copy ours patched still works, without
# LD_LIBRARY_PATH, and that every shared object still resolves where the original did.
#   bash bench/gpu-auto-patchelf.sh OUT_DIR CARRY_DIR        (ROUNDS=3: paired rounds, each on fresh copies)
# BEFORE=DIR (a directory with another build's dist/, relative to CARRY_DIR or absolute): each round also
# times that build's `apply` on a fresh copy, so that two builds are compared on one boot of the machine.
# CARRY_DIR holds what the GPU machine lacks: node.xz (this machine's node, xz-compressed),
# auto-patchelf.py (bench/auto-patchelf/README.md says where it comes from), elftools/ (pyelftools,
# pure Python) and patchelf-0.18/ (bash bench/closure/assemble.sh --only patchelf-0.18), which is run
# through its own loader, since its interpreter path is the machine's that built it.
set -euo pipefail
out=$1
carry=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/script-start.sh
source "$here/lib/script-start.sh"
scratch /tmp/cuda-patchelf-gpu-ap

# shellcheck source=lib/gpu-driver.sh
source "$here/lib/gpu-driver.sh"
carried_tools "$carry"
log "node $("${cli[0]}" --version), $("$work/bin/patchelf" --version), $(nproc) CPUs"

libcuda=$(driver_libcuda)
driver="$work/opengl-driver"
make_driver_link "$driver" "$libcuda"
compat="$work/cuda_compat"
mkdir -p "$compat/compat"
stand_in_bintools

pristine="$work/pristine"
copy_torch_closure "$pristine"
log "closure: $(du -sb "$pristine" | cut -f1) bytes, $(find "$pristine" -type f | wc -l) files"
copy() { rm -rf "$work/tree" && cp -a "$pristine" "$work/tree" && sync; }

# Both sides search the same directories, ignore the same missing names (the driver's, which the
# driver hook provides, and whatever the system lacks: both report them), and add the same hooks.
libs=(/usr/lib/x86_64-linux-gnu)
anchor_fixup() {
  NIX_BINTOOLS=$work/bintools PATH=$work/bin:$PATH PYTHONPATH=$carry/elftools \
    python3 "$carry/auto-patchelf.py" --ignore-missing '*' --paths "$work/tree" --libs "${libs[@]}" \
    && PATCHELF=$work/bin/patchelf bash "$here/nixpkgs-sequence.sh" "$work/tree" "$compat"
}
ours=(apply --jobs "$(nproc)" --auto-patchelf --ignore-missing '*' --libs "${libs[@]}" --interpreter "$interpreter"
  --libc-dir "$libc" --driver-link "$driver" --cuda-compat "$compat" "$work/tree")

before=${BEFORE:+$(cd "$carry" && cd "$BEFORE" && pwd)}
for round in $(seq "${ROUNDS:-3}"); do
  copy
  timed "anchor-$round" anchor_fixup
  copy
  timed "ours-$round" "${cli[@]}" "${ours[@]}"
  if [[ -n $before ]]; then
    copy
    timed "before-$round" "${cli[0]}" "$before/dist/cli/main.js" "${ours[@]}"
  fi
done
log "ours: $(grep -c 'not found' "$out/ours-1.log" || true) missing-library warnings; the anchor: $(grep -c 'could not satisfy' "$out/anchor-1.log" || true)"
ours_check=("${ours[@]}")
ours_check[0]=check
"${cli[@]}" "${ours_check[@]}" >/dev/null 2>&1 && log "check after ours: exit 0"
log "after ours, LD_LIBRARY_PATH unset: $(env -u LD_LIBRARY_PATH bash -c "$(declare -f gpu_check); gpu_check '$work/tree'" 2>&1 | tail -1)"
broken=0
listed=0
while IFS= read -r f; do
  listed=$((listed + 1))
  if ! env -u LD_LIBRARY_PATH "$interpreter" --list "$f" >/dev/null 2>&1 \
    && env -u LD_LIBRARY_PATH "$interpreter" --list "$pristine/${f#"$work/tree/"}" >/dev/null 2>&1; then
    broken=$((broken + 1))
    log "newly broken: $f"
  fi
done < <(find "$work/tree" -name '*.so*' -type f)
log "ld.so --list: $broken newly broken of $listed shared objects"
rm -rf "$work"
