#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, a driver and PyTorch (whose host may hold another cuDNN in
# /usr/lib/x86_64-linux-gnu): does the loader open what --auto-patchelf says it chose? A copy of
# PyTorch's CUDA closure as shipped (torch and the nvidia-* wheels, $ORIGIN runpaths) is patched with
#   apply --auto-patchelf --libs /usr/lib/x86_64-linux-gnu --interpreter /lib64/ld-linux-x86-64.so.2
#         --driver-link D
# three ways: by the build before the runpath order (OLD_DIST) with a glibc-only libc directory, and by
# this build with a glibc-only libc directory and with the interpreter's. For each, with LD_LIBRARY_PATH
# unset: what the cuDNN libraries' runpaths are; doctor's verdict (exit code, runpath-shadows-own
# findings on cuDNN); a cuBLAS matrix product and a cuDNN convolution; and which cuDNN files the real
# loader opens (LD_DEBUG=libs during that run) against the ones doctor names for libtorch_cuda.so
# (its loads and its sibling dlopens).
#   bash bench/gpu-resolution-truth.sh OUT_DIR [OLD_DIST]      (OLD_DIST: the dist/ of another build, beside its package.json)
# Needs: node (on PATH, or NODE=), dist/ built (npm run build), python3 with torch.
set -euo pipefail
out=$1
old_dist=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/script-start.sh
source "$here/lib/script-start.sh"
scratch /tmp/cuda-patchelf-resolution-truth

# shellcheck source=lib/gpu-driver.sh
source "$here/lib/gpu-driver.sh"
libcuda=$(driver_libcuda)
driver="$work/opengl-driver"
make_driver_link "$driver" "$libcuda"
host_lib=/usr/lib/x86_64-linux-gnu
log "kernel driver $(cat /sys/module/nvidia/version 2>/dev/null || echo unknown); host cuDNN: $(cd "$host_lib" && ls libcudnn.so.* 2>/dev/null | tr '\n' ' ')"

# What Nix's glibc directory holds: glibc's own libraries (links to the host's).
glibc="$work/glibc"
mkdir -p "$glibc"
for name in ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libmvec.so.1 libpthread.so.0 libdl.so.2 librt.so.1 libutil.so.1 \
  libresolv.so.2 libanl.so.1 libBrokenLocale.so.1 libc_malloc_debug.so.0 libthread_db.so.1 libnsl.so.1 \
  libnss_files.so.2 libnss_dns.so.2; do
  if [ -e "$host_lib/$name" ]; then ln -s "$host_lib/$name" "$glibc/$name"; fi
done

pristine="$work/pristine"
copy_torch_closure "$pristine"
log "closure: $(du -sb "$pristine" | cut -f1) bytes, $(find "$pristine" -type f -name '*.so*' | wc -l) shared objects"

# The cuDNN files a run loads, from LD_DEBUG=libs ("calling init: PATH"), as real paths, one per line
# (the run may fail: the files it loaded before are what counts).
loaded_cudnn() {
  { env -u LD_LIBRARY_PATH LD_DEBUG=libs PYTHONPATH=$1 python3 - 2>&1 >/dev/null || true; } <<'EOF' | sed -n 's/.*calling init: \(.*libcudnn[^ ]*\)$/\1/p' | xargs -r realpath | LC_ALL=C sort -u
import torch, torch.nn.functional as F
x = torch.randn(8, 3, 64, 64, device='cuda'); w = torch.randn(16, 3, 3, 3, device='cuda')
F.conv2d(x, w).sum().item(); torch.cuda.synchronize()
EOF
}

# The cuDNN files doctor says libtorch_cuda.so loads (its loads, and what each library dlopens), as real paths.
doctor_cudnn() {
  # doctor exits 1 when it finds a problem: the report is what is read.
  { env -u LD_LIBRARY_PATH "${cli[@]}" doctor --json "$1/torch/lib/libtorch_cuda.so" 2>/dev/null || true; } | python3 -c '
import json, os, sys
report = json.load(sys.stdin)["files"][0]
paths = [load["path"] for load in report["loads"]] + [load["path"] for d in report["dlopen"] for load in d["loads"]]
for path in sorted({os.path.realpath(p) for p in paths if "libcudnn" in os.path.basename(p)}):
    print(path)
'
}

variants=(new-glibc new-interpreter)
[ -n "$old_dist" ] && variants=(old-glibc "${variants[@]}")
for variant in "${variants[@]}"; do
  tree="$work/$variant"
  cp -a "$pristine" "$tree"
  case $variant in
    old-*) run=("$node" "$old_dist/cli/main.js") ;;
    *) run=("${cli[@]}") ;;
  esac
  libc=()
  [ "${variant#*-}" = glibc ] && libc=(--libc-dir "$glibc")
  set +e
  "${run[@]}" apply --auto-patchelf --libs "$host_lib" --interpreter /lib64/ld-linux-x86-64.so.2 "${libc[@]}" \
    --driver-link "$driver" --ignore-missing '*' "$tree" >"$out/apply-$variant.txt" 2>&1
  code=$?
  set -e
  log "$variant: apply exit $code: $(grep 'cuda-patchelf apply:' "$out/apply-$variant.txt" | tail -1)"
  log "$variant: files refused: $(grep -c 'cannot order\|would not load' "$out/apply-$variant.txt" || true)"
  for lib in libcudnn.so.9 libcudnn_adv.so.9 libcudnn_graph.so.9; do
    file=$(find "$tree" -name "$lib" -type f | head -1)
    if [ -n "$file" ]; then log "$variant: $lib RUNPATH: $(readelf -dW "$file" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')"; fi
  done
  # The CUDA closure proper (torchvision's and torchaudio's extension modules need torch loaded first).
  parts=()
  for part in torch nvidia triton; do [ -d "$tree/$part" ] && parts+=("$tree/$part"); done
  set +e
  env -u LD_LIBRARY_PATH "${cli[@]}" doctor "${parts[@]}" >"$out/doctor-$variant.txt" 2>&1
  code=$?
  set -e
  log "$variant: doctor (torch, nvidia, triton) exit $code: $(grep -E '^/.*: [0-9]+ dynamic ELF' "$out/doctor-$variant.txt" | tr '\n' ' ')"
  log "$variant: doctor runpath-shadows-own on cuDNN: $(grep -c 'runpath-shadows-own.*libcudnn' "$out/doctor-$variant.txt" || true)"
  log "$variant: gpu: $(env -u LD_LIBRARY_PATH bash -c "$(declare -f gpu_check); gpu_check '$tree'" 2>&1 | tail -1)"
  loaded_cudnn "$tree" >"$out/ld-debug-cudnn-$variant.txt"
  doctor_cudnn "$tree" >"$out/doctor-cudnn-$variant.txt"
  log "$variant: cuDNN files the loader opened: $(wc -l <"$out/ld-debug-cudnn-$variant.txt"), from: $(xargs -r -n1 dirname <"$out/ld-debug-cudnn-$variant.txt" | sort -u | tr '\n' ' ')"
  missing=$(LC_ALL=C comm -23 "$out/ld-debug-cudnn-$variant.txt" "$out/doctor-cudnn-$variant.txt" | wc -l)
  log "$variant: of those, doctor names $(($(wc -l <"$out/ld-debug-cudnn-$variant.txt") - missing)) (names $(wc -l <"$out/doctor-cudnn-$variant.txt") in all)"
  rm -rf "$tree"
done
rm -rf "$work"
