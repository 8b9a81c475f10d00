# shellcheck shell=bash
# Sourced by the GPU scripts in bench/: where this machine's PyTorch and NVIDIA driver are, and a driver
# link made of them (a directory holding the driver's libraries, as /run/opengl-driver is on NixOS).

# The site-packages directory that holds torch.
torch_site() {
  python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))'
}

# The real path of the libcuda.so.1 this machine's loader finds.
driver_libcuda() {
  python3 - <<'PY'
import ctypes, os
ctypes.CDLL('libcuda.so.1')
for line in open('/proc/self/maps'):
    if 'libcuda.so' in line:
        print(os.path.realpath(line.split()[-1]))
        break
PY
}

# log_driver LIBCUDA COMPAT_DIR: logs the kernel driver's version, the driver's libcuda and the libcuda files
# of the compat directory (the caller defines log).
log_driver() {
  log "kernel driver: $(cat /sys/module/nvidia/version 2>/dev/null || head -1 /proc/driver/nvidia/version)"
  log "driver libcuda: $1"
  log "compat directory: $2 ($(cd "$2" && ls libcuda.so.* 2>/dev/null | tr '\n' ' '))"
}

# make_driver_link DIR LIBCUDA: DIR/lib holds links to every library beside LIBCUDA, and libcuda.so.1.
make_driver_link() {
  local dir=$1 libcuda=$2 lib
  mkdir -p "$dir/lib"
  for lib in "$(dirname "$libcuda")"/lib*.so*; do ln -s "$lib" "$dir/lib/$(basename "$lib")"; done
  ln -sf "$libcuda" "$dir/lib/libcuda.so.1"
}

# copy_torch_closure DIR: this machine's PyTorch closure (torch, the nvidia-* CUDA wheels, triton,
# torchvision, torchaudio, those present) copied into DIR.
copy_torch_closure() {
  local dest=$1 site dir
  site=$(torch_site)
  mkdir -p "$dest"
  for dir in "$site"/torch "$site"/nvidia "$site"/triton "$site"/torchvision "$site"/torchaudio; do
    if [ -d "$dir" ]; then cp -a "$dir" "$dest/"; fi
  done
}

# start_cuda DIR: start CUDA from the copy of torch in DIR, LD_LIBRARY_PATH unset (it outranks runpaths);
# prints "cuda ok DEVICE" or "cuda failed: WHY".
start_cuda() {
  env -u LD_LIBRARY_PATH PYTHONPATH="$1" python3 - <<'PY' 2>&1 | tail -1
import os, torch
assert torch.__file__.startswith(os.environ['PYTHONPATH']), torch.__file__
try:
    torch.zeros(1, device='cuda')
    torch.cuda.synchronize()
    print('cuda ok', torch.cuda.get_device_name())
except Exception as error:
    print('cuda failed:', str(error).splitlines()[0])
PY
}

# gpu_check DIR: a cuBLAS(Lt) matrix product and a cuDNN convolution, from the copy of torch in DIR.
gpu_check() {
  PYTHONPATH=$1 python3 - <<'EOF'
import os, torch, torch.nn.functional as F
assert torch.__file__.startswith(os.environ['PYTHONPATH']), torch.__file__
a = torch.randn(2048, 2048, device='cuda', dtype=torch.bfloat16)
b = (a @ a).float().sum().item()
x = torch.randn(8, 3, 64, 64, device='cuda'); w = torch.randn(16, 3, 3, 3, device='cuda')
c = F.conv2d(x, w).sum().item()
torch.cuda.synchronize()
print('gpu ok', torch.__version__, torch.cuda.get_device_name(), 'cudnn', torch.backends.cudnn.version(), b == b, c == c)
EOF
}

# timed NAME COMMAND...: runs COMMAND with its output in $out/NAME.log and logs its wall time (the
# caller defines out and log); a failure logs the end of its output and returns 1.
timed() {
  local name=$1
  shift
  local start end
  start=$(date +%s%N)
  "$@" >"$out/$name.log" 2>&1 || { log "$name: FAILED ($(tail -3 "$out/$name.log"))"; return 1; }
  end=$(date +%s%N)
  log "$name: $(((end - start) / 1000000)) ms"
}

# carried_tools CARRY: node and patchelf 0.18 from CARRY (what the GPU machine lacks) into $work/bin; cli
# runs this checkout's build with that node. patchelf runs through its own loader, since its
# interpreter path is the machine's that built it.
carried_tools() {
  local carry=$1 libdir=$1/patchelf-0.18/root/usr/lib/x86_64-linux-gnu
  mkdir -p "$work/bin"
  xz -dc "$carry/node.xz" >"$work/bin/node" && chmod +x "$work/bin/node"
  cli=("$work/bin/node" "$here/../dist/cli/main.js")
  printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$libdir/ld-linux-x86-64.so.2" "$libdir" \
    "$carry/patchelf-0.18/bin/patchelf" >"$work/bin/patchelf"
  chmod +x "$work/bin/patchelf"
}

# stand_in_bintools: the auto-patchelf hook's $NIX_BINTOOLS in $work/bintools, the interpreter
# ($interpreter) and a libc whose lib/ ($libc) is this system's.
stand_in_bintools() {
  interpreter=/lib64/ld-linux-x86-64.so.2
  libc=$(dirname "$(readlink -f "$interpreter")")
  mkdir -p "$work/bintools/nix-support" "$work/libc"
  echo "$interpreter" >"$work/bintools/nix-support/dynamic-linker"
  ln -s "$libc" "$work/libc/lib"
  echo "$work/libc" >"$work/bintools/nix-support/orig-libc"
}
