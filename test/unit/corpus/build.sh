#!/usr/bin/env bash
# Builds the unit-test corpus: tiny, stripped, real ELF files, one per layout the reader and planner
# must handle. The outputs are committed, so the unit tests need no compiler; run this only to change
# the corpus (then update the expectations in test/unit/corpus-table.ts).
# Needs gcc, ld.lld and the cross compilers named below; a missing cross compiler skips its file.
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A library with one function and a program that exits at once: the code matters only in being real.
cat >"$work/lib.c" <<'C'
int corpus_value(void) { return 42; }
C
cat >"$work/main.c" <<'C'
#include <unistd.h>
void _start(void) { _exit(0); }
C

# Small and reproducible: no build id, no start files, stripped at link time, GNU hash only.
small=(-Os -s -Wl,--build-id=none -Wl,--hash-style=gnu -fno-asynchronous-unwind-tables -Wl,-z,noseparate-code)

shared() { # compiler output extra...
  local cc=$1 out=$2
  shift 2
  "$cc" "${small[@]}" -shared -fPIC -nostartfiles -Wl,--no-as-needed "$work/lib.c" -o "$out" "$@" -lc
}

# x86_64: a PIE with DT_RUNPATH and an interpreter; a library without runpath; one with DT_RPATH.
gcc "${small[@]}" -fPIE -pie -nostartfiles "$work/main.c" -o x86_64-pie-runpath.elf \
  -Wl,--enable-new-dtags -Wl,-rpath,'$ORIGIN/../lib:/opt/corpus/lib'
shared gcc x86_64-lib-plain.so -Wl,-soname,libplain.so.1 -lm
shared gcc x86_64-lib-rpath.so -Wl,-soname,librpath.so.1 -Wl,--disable-new-dtags -Wl,-rpath,/opt/corpus/rpath
# lld writes no spare DT_NULL slots after the terminator: a new tag must move the dynamic array.
shared gcc x86_64-lib-lld.so -fuse-ld=lld -Wl,-soname,liblld.so.1 -Wl,--enable-new-dtags -Wl,-rpath,/opt/corpus/lld

# aarch64 with 64 KiB pages (as on Grace and Jetson kernels). No RELRO here and on ppc64: its page-aligned
# end would pad the file to 64 KiB.
shared aarch64-linux-gnu-gcc aarch64-lib-64k.so -Wl,-soname,libarm64.so.1 -Wl,-z,max-page-size=65536 -Wl,-z,norelro \
  -Wl,--enable-new-dtags -Wl,-rpath,/opt/corpus/arm64

# ELF32, little-endian.
if command -v arm-linux-gnueabihf-gcc >/dev/null; then
  shared arm-linux-gnueabihf-gcc arm32-lib.so -Wl,-soname,libarm32.so.1 -Wl,--enable-new-dtags -Wl,-rpath,/opt/corpus/arm32
else
  echo "arm-linux-gnueabihf-gcc not found: arm32-lib.so not rebuilt" >&2
fi

# ELF64, big-endian.
if command -v powerpc64-linux-gnu-gcc >/dev/null; then
  shared powerpc64-linux-gnu-gcc ppc64be-lib.so -Wl,-soname,libppc64.so.1 -Wl,-z,norelro -Wl,--enable-new-dtags -Wl,-rpath,/opt/corpus/ppc64
else
  echo "powerpc64-linux-gnu-gcc not found: ppc64be-lib.so not rebuilt" >&2
fi

ls -l ./*.elf ./*.so
