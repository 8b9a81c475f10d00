#!/usr/bin/env bash
# Assembles, from what the fixtures and the closure benchmark already hold, the trees and stand-ins
# that the autoPatchelf benchmarks and differential run on, into bench/.cache/auto-patchelf/
# (git-ignored):
#
#   trees/debian-600/out/<package>/lib/   the lib/ of the closure's amd64 Debian packages, in byte
#                                         order of their names, up to 600 ELF libraries (programs left
#                                         out); runpaths removed
#   trees/cuda/out/<package>/             libcublas, libcublasLt, libcudart, libnvrtc, libnvToolsExt
#                                         (amd64, 0.7 GB); runpaths removed
#   trees/packages/out/<arch>/<package>/  programs and libraries of six Debian packages per architecture,
#   trees/packages/deps/<arch>/<package>/ and four library packages they need (found through --libs)
#   trees/duplicate-soname/               libtbb.so.12 in three directories of out/ (one of them arm64)
#                                         and in libs/, and libopencv_core, which needs it
#   trees/origin/out/pkg/                 real libraries (lapack, blas, gfortran, opencv_core, tbb) and a
#                                         program, with `$ORIGIN` and `${ORIGIN}` runpaths
#   trees/shadowing/                      small libraries and a program built here, one for each place
#                                         where the runpath's order or the libc rule decides
#   bintools/<name>/nix-support/          stand-ins for $NIX_BINTOOLS: dynamic-linker and orig-libc (whose
#                                         lib/ is the libc directory): x86_64 (/usr/lib/x86_64-linux-gnu),
#                                         x86_64-glibc (glibc's libraries only, as Nix's glibc/lib), aarch64
#   patchelf/<version>/patchelf           a PATH entry each for patchelf 0.14.3 and 0.18
#
# Each part is rebuilt only when what makes it changed (a .stamp with the hash of its inputs), into
# <part>.tmp first. Inputs: $CUDA_PATCHELF_FIXTURES_CACHE (default fixtures/.cache, `npm run
# fixtures`) and $CUDA_PATCHELF_BENCH_CACHE (default bench/.cache/closure, bench/closure/assemble.sh).
#   bash bench/auto-patchelf/assemble.sh
set -euo pipefail

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd -- "$here/../.." && pwd)
fixtures=${CUDA_PATCHELF_FIXTURES_CACHE:-$repo/fixtures/.cache}
closure=${CUDA_PATCHELF_BENCH_CACHE:-$repo/bench/.cache/closure}
cache=$repo/bench/.cache/auto-patchelf
lock_deb=$repo/bench/closure-packages.lock
log_tag=bench-auto-patchelf

# shellcheck source=fixtures/lib/common.sh
. "$repo/fixtures/lib/common.sh"
# shellcheck source=fixtures/lib/debian-packages.sh
. "$repo/fixtures/lib/debian-packages.sh"
# shellcheck source=bench/lib/build-once.sh
. "$repo/bench/lib/build-once.sh"

sha() { sha256sum | cut -c1-32; }

# What each part is made from: a stamp of each input cache, checked to exist.
input_stamp() {
  local stamp=$1 how=$2
  [ -f "$stamp" ] || die "missing $stamp: run $how first"
  cat "$stamp"
}
inputs() {
  input_stamp "$fixtures/debian/amd64-base/.stamp" 'npm run fixtures'
  input_stamp "$fixtures/debian/amd64/.stamp" 'npm run fixtures'
  input_stamp "$fixtures/debian/arm64/.stamp" 'npm run fixtures'
  input_stamp "$fixtures/sysroot-arm64/fixtures.tsv" 'npm run fixtures'
  input_stamp "$closure/tree/.stamp" 'bash bench/closure/assemble.sh'
  input_stamp "$closure/patchelf-0.18/.stamp" 'bash bench/closure/assemble.sh'
}

is_elf() { [ "$(head -c 4 "$1" | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; }

# Every regular ELF file under DIR, in byte order.
elf_files() {
  local f
  while IFS= read -r -d '' f; do if is_elf "$f"; then printf '%s\n' "$f"; fi; done < <(find "$1" -type f -print0 | LC_ALL=C sort -z)
}

# Removes DT_RUNPATH/DT_RPATH from every ELF file under DIR that has one (the runpath Nix would have
# to find again).
remove_runpaths() {
  local f
  while IFS= read -r f; do
    if [ -n "$(patchelf --print-rpath "$f" 2>/dev/null)" ]; then patchelf --remove-rpath "$f"; fi
  done < <(elf_files "$1")
}

build_debian_600() {
  local out=$1 name count=0 more
  while read -r name; do
    [ -d "$closure/tree/amd64/$name/lib" ] || continue
    more=$(elf_files "$closure/tree/amd64/$name/lib" | awk -F/ '$NF ~ /\.so/' | wc -l)
    if [ $((count + more)) -gt 600 ]; then break; fi
    count=$((count + more))
    mkdir -p "$out/out/$name"
    cp -a "$closure/tree/amd64/$name/lib" "$out/out/$name/lib"
  done < <(deb_lines debian amd64 | awk '{ print $1 }' | LC_ALL=C sort)
  # Libraries alone: the programs some packages keep under lib/ (GIMP's plug-ins) go.
  elf_files "$out/out" | awk -F/ '$NF !~ /\.so/' | while IFS= read -r f; do rm "$f"; done
  log "debian-600: $count ELF libraries"
  remove_runpaths "$out/out"
}

build_cuda() {
  local out=$1 name
  for name in libcublas11 libcublaslt11 libcudart11.0 libnvrtc11.2 libnvtoolsext1; do
    mkdir -p "$out/out"
    cp -a "$closure/tree/amd64/$name" "$out/out/$name"
  done
  remove_runpaths "$out/out"
}

# The CUDA 11.8 toolkit's libraries as Debian ships them (25 packages, 1.7 GB; the driver's own
# libraries, which a CUDA package does not patch, left out): the large-file case, as NVIDIA's CUDA
# wheels are.
build_cuda_toolkit() {
  local out=$1 name
  mkdir -p "$out/out"
  for name in libcublas11 libcublaslt11 libcudart11.0 libcufft10 libcufftw10 libcupti11.8 libcurand10 \
    libcusparse11 libnppc11 libnppial11 libnppicc11 libnppidei11 libnppif11 libnppig11 libnppim11 libnppist11 \
    libnppisu11 libnppitc11 libnpps11 libnvblas11 libnvjpeg11 libnvrtc-builtins11.8 libnvrtc11.2 libnvtoolsext1 libnvvm4; do
    cp -a "$closure/tree/amd64/$name" "$out/out/$name"
  done
  remove_runpaths "$out/out"
}

build_packages() {
  local out=$1 arch name
  for arch in amd64 arm64; do
    mkdir -p "$out/out/$arch" "$out/deps/$arch"
    for name in coreutils gimp libopencv-contrib406 libsane1 libvtk9.1 llvm-15; do
      cp -a "$closure/tree/$arch/$name" "$out/out/$arch/$name"
    done
    for name in libgegl-0.4-0 libgphoto2-6 libopenmpi3 libqt5gui5; do
      cp -a "$closure/tree/$arch/$name" "$out/deps/$arch/$name"
    done
  done
}

build_duplicate_soname() {
  local out=$1 amd64=$fixtures/debian/amd64/usr/lib/x86_64-linux-gnu arm64=$fixtures/debian/arm64/usr/lib/aarch64-linux-gnu
  mkdir -p "$out/out/aarch64-first/lib" "$out/out/alpha/lib" "$out/out/alpha/real" "$out/out/zeta/lib" "$out/out/app/lib" "$out/libs"
  # First in byte order, but for another machine: never the answer for an x86_64 file.
  cp "$arm64/libtbb.so.12.8" "$out/out/aarch64-first/lib/libtbb.so.12"
  # A link named otherwise than its target: indexed in the link's directory, alpha/lib.
  cp "$amd64/libtbb.so.12.8" "$out/out/alpha/real/libtbb.so.12.8"
  ln -s ../real/libtbb.so.12.8 "$out/out/alpha/lib/libtbb.so.12"
  cp "$amd64/libtbb.so.12.8" "$out/out/zeta/lib/libtbb.so.12"
  # After both tree copies: --libs comes after the trees.
  cp "$amd64/libtbb.so.12.8" "$out/libs/libtbb.so.12"
  cp -a "$amd64/libopencv_core.so.4.6.0" "$amd64/libopencv_core.so.406" "$out/out/app/lib/"
  remove_runpaths "$out/out"
}

build_origin() {
  local out=$1 amd64=$fixtures/debian/amd64/usr/lib/x86_64-linux-gnu lib
  lib=$out/out/pkg/lib
  mkdir -p "$lib/blas" "$lib/fortran" "$lib/tbb" "$lib/plugins" "$out/out/pkg/bin"
  cp -a "$amd64/lapack/liblapack.so.3.11.0" "$amd64/lapack/liblapack.so.3" "$lib/"
  cp -a "$amd64/blas/libblas.so.3.11.0" "$amd64/blas/libblas.so.3" "$lib/blas/"
  cp -a "$amd64/libgfortran.so.5.0.0" "$amd64/libgfortran.so.5" "$lib/fortran/"
  cp -a "$amd64/libtbb.so.12.8" "$amd64/libtbb.so.12" "$lib/tbb/"
  cp -a "$amd64/libopencv_core.so.4.6.0" "$amd64/libopencv_core.so.406" "$lib/"
  # The program is built here: no Debian program needs these libraries and nothing the host has.
  printf 'int main(void) { return 0; }\n' >"$out/solve.c"
  gcc -o "$out/out/pkg/bin/solve" "$out/solve.c" -Wl,--no-as-needed -L"$lib" -l:liblapack.so.3 -l:libopencv_core.so.406 \
    -Wl,--allow-shlib-undefined -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/../lib'
  rm "$out/solve.c"
  # Both spellings, entries for the file's own dependencies and one naming a plug-in directory,
  # and absolute entries beside them: one that does not exist, one outside the tree that holds a
  # second libblas.so.3 (indexed after the tree's).
  patchelf --set-rpath '$ORIGIN/blas:${ORIGIN}/fortran:/nonexistent/lib' "$lib/liblapack.so.3.11.0"
  patchelf --set-rpath '${ORIGIN}/../fortran' "$lib/blas/libblas.so.3.11.0"
  patchelf --set-rpath '$ORIGIN' "$lib/fortran/libgfortran.so.5.0.0"
  patchelf --set-rpath "\$ORIGIN/tbb:\${ORIGIN}/plugins:$amd64/blas" "$lib/libopencv_core.so.4.6.0"
}

# A shared object built here: LIB (a path) from C source SOURCE, then the linker's arguments.
shared_object() {
  local lib=$1 source=$2
  shift 2
  printf '%s\n' "$source" | gcc -shared -fPIC -o "$lib" -x c - -Wl,--no-as-needed "$@"
}

# Where the runpath's order and the libc rule decide (docs/auto-patchelf.md), one file each; every
# "other copy" differs in its bytes (a byte-identical copy is no other copy):
#   first/lib/libshadow_w.so            indexed first (the first tree), another copy than the one
#   out/own/lib/libshadow_own_user.so   needs, which its own $ORIGIN/vendor holds (rule 4)
#   out/sib/lib/libshadow_sib_user.so   needs libshadow_x.so (deps/lib, through --libs), then its
#                                       sibling libshadow_y.so; its $ORIGIN holds libshadow_sib.so,
#                                       which deps/lib holds another copy of (its own entry first)
#   out/bin/shadow_prog                 needs libshadow_q.so (out/lib); rt/lib, a
#                                       --runtime-dependencies entry, holds another copy: no order
#                                       keeps both, the file is refused
#   out/z/lib/libshadow_z_user.so       needs libz.so.1, which out/z/lib holds as well as the host's
#                                       libc directory, which holds more than glibc (rule 2)
build_shadowing() {
  local out=$1 amd64=$fixtures/debian/amd64/usr/lib/x86_64-linux-gnu
  mkdir -p "$out/first/lib" "$out/out/own/lib/vendor" "$out/out/sib/lib" "$out/deps/lib" "$out/out/bin" "$out/out/lib" \
    "$out/rt/lib" "$out/out/z/lib"
  shared_object "$out/first/lib/libshadow_w.so" 'int w(void) { return 1; }'
  shared_object "$out/out/own/lib/vendor/libshadow_w.so" 'int w(void) { return 2; }'
  shared_object "$out/out/own/lib/libshadow_own_user.so" 'int own(void) { return 0; }' \
    -L"$out/out/own/lib/vendor" -lshadow_w -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/vendor'
  shared_object "$out/deps/lib/libshadow_x.so" 'int x(void) { return 1; }'
  shared_object "$out/deps/lib/libshadow_sib.so" 'int sib(void) { return 1; }'
  shared_object "$out/out/sib/lib/libshadow_sib.so" 'int sib(void) { return 2; }'
  shared_object "$out/out/sib/lib/libshadow_y.so" 'int y(void) { return 1; }'
  shared_object "$out/out/sib/lib/libshadow_sib_user.so" 'int sib_user(void) { return 0; }' \
    -L"$out/deps/lib" -lshadow_x -L"$out/out/sib/lib" -lshadow_y -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN'
  shared_object "$out/out/lib/libshadow_q.so" 'int q(void) { return 1; }'
  shared_object "$out/rt/lib/libshadow_q.so" 'int q(void) { return 2; }'
  printf 'int main(void) { return 0; }\n' | gcc -o "$out/out/bin/shadow_prog" -x c - -Wl,--no-as-needed -L"$out/out/lib" -lshadow_q
  cp "$amd64/libz.so.1.2.13" "$out/out/z/lib/libz.so.1"
  printf '\0' >>"$out/out/z/lib/libz.so.1"
  shared_object "$out/out/z/lib/libshadow_z_user.so" 'int z_user(void) { return 0; }' -L"$out/out/z/lib" -l:libz.so.1
}

# bintools/NAME: nix-support/dynamic-linker holds INTERPRETER; nix-support/orig-libc names
# bintools/NAME/libc, whose lib is LIBC_DIR (a link to it).
bintools() {
  local dir=$1 interpreter=$2 libc_dir=$3
  mkdir -p "$dir/nix-support" "$dir/libc"
  printf '%s\n' "$interpreter" >"$dir/nix-support/dynamic-linker"
  printf '%s\n' "$cache/bintools/${dir##*/}/libc" >"$dir/nix-support/orig-libc"
  ln -s "$libc_dir" "$dir/libc/lib"
}

build_bintools() {
  local out=$1 glibc f
  bintools "$out/x86_64" /lib64/ld-linux-x86-64.so.2 /usr/lib/x86_64-linux-gnu
  bintools "$out/aarch64" "$fixtures/sysroot-arm64/lib/ld-linux-aarch64.so.1" "$fixtures/sysroot-arm64/usr/lib/aarch64-linux-gnu"
  # Nix's glibc/lib holds glibc alone: libstdc++ and libgcc_s come from gcc's lib, through --libs.
  glibc=$out/x86_64-glibc/glibc
  mkdir -p "$glibc"
  for f in "$fixtures/debian/amd64-base/usr/lib/x86_64-linux-gnu"/*.so*; do
    case ${f##*/} in libstdc++* | libgcc_s*) ;; *) ln -s "$f" "$glibc/${f##*/}" ;; esac
  done
  bintools "$out/x86_64-glibc" /lib64/ld-linux-x86-64.so.2 "$cache/bintools/x86_64-glibc/glibc"
}

build_patchelf() {
  local out=$1
  /usr/bin/patchelf --version | grep -q '^patchelf 0\.14\.3$' || die "/usr/bin/patchelf is not patchelf 0.14.3"
  "$closure/patchelf-0.18/bin/patchelf" --version | grep -q '^patchelf 0\.18' || die "$closure/patchelf-0.18 does not run"
  mkdir -p "$out/0.14.3" "$out/0.18"
  ln -s /usr/bin/patchelf "$out/0.14.3/patchelf"
  ln -s "$closure/patchelf-0.18/bin/patchelf" "$out/0.18/patchelf"
}

need_tools patchelf gcc readelf
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

input_key=$(inputs | sha)
part() { build_once "$1" "$({ echo "$input_key $cache $fixtures $closure"; declare -f "$2" "${@:3}"; } | sha)" "$2"; }
part trees/debian-600 build_debian_600 elf_files remove_runpaths
part trees/cuda build_cuda elf_files remove_runpaths
part trees/cuda-toolkit build_cuda_toolkit elf_files remove_runpaths
part trees/packages build_packages
part trees/duplicate-soname build_duplicate_soname elf_files remove_runpaths
part trees/origin build_origin
part trees/shadowing build_shadowing shared_object
part bintools build_bintools bintools
part patchelf build_patchelf
log "ready: $cache"
