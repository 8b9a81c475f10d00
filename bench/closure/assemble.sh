#!/usr/bin/env bash
# Assembles, once, what `npm run bench:closure` needs into bench/.cache/closure/ (git-ignored):
#
#   tree/<arch>/<package>/   one build output per package of bench/closure-packages.lock (sets
#                            debian and cuda): bin/, lib/ (the multiarch directory flattened into
#                            it), libexec/, share/, etc/..., with the packages' symlinks and
#                            non-ELF files; documentation, manuals and translations left out (Nixpkgs
#                            puts them in other outputs)
#   patchelf-0.18/           patchelf 0.18 from Debian 13 with the C/C++ runtime it needs, its
#                            interpreter and runpath pointed there (set other-patchelf)
#   tools/read-heads         bench/closure/read-heads.c, compiled
#
# Each part is rebuilt only when what makes it changed (a .stamp with the hash of its inputs), into
# <part>.tmp first, so an interrupted run leaves nothing half-made. Downloads are kept in
# downloads/debian/ and checked against the lock's sha256 (fixtures/lib/debian-packages.sh).
#   bash bench/closure/assemble.sh
#   bash bench/closure/assemble.sh --only patchelf-0.18   # that part alone (npm test needs it: the
#                                                          # tests compare with patchelf 0.18)
set -euo pipefail

only=
case "${1-}" in
  '') ;;
  --only) only=${2:?--only takes a part: tree, patchelf-0.18 or tools} ;;
  *) echo "usage: bash bench/closure/assemble.sh [--only tree|patchelf-0.18|tools]" >&2; exit 2 ;;
esac
# wanted PART: whether this run builds PART.
wanted() { [ -z "$only" ] || [ "$only" = "$1" ]; }

here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd -- "$here/../.." && pwd)
cache=${CUDA_PATCHELF_BENCH_CACHE:-$repo/bench/.cache/closure}
lock_deb=$repo/bench/closure-packages.lock
log_tag=bench-closure

# shellcheck source=fixtures/lib/common.sh
. "$repo/fixtures/lib/common.sh"
# shellcheck source=fixtures/lib/debian-packages.sh
. "$repo/fixtures/lib/debian-packages.sh"
# shellcheck source=bench/lib/build-once.sh
. "$repo/bench/lib/build-once.sh"

sha() { sha256sum | cut -c1-32; }
triplet() { case "$1" in amd64) echo x86_64-linux-gnu ;; arm64) echo aarch64-linux-gnu ;; *) die "unknown Debian arch $1" ;; esac; }

# lay_out ROOT OUT TRIPLET: moves an unpacked package (as dpkg-deb -x leaves it) into OUT, laid out
# as a build output. Hard links, then the unpacked copy goes: no second copy of the data.
lay_out() {
  local root=$1 out=$2 t=$3 pair from to
  rm -rf "$root"/usr/share/{doc,man,info,locale,lintian,bug,bug-reporting}
  for pair in "usr/lib/$t:lib" "lib/$t:lib" usr/bin:bin bin:bin usr/sbin:bin sbin:bin usr/lib:lib lib:lib usr:.; do
    from=$root/${pair%%:*}
    to=$out/${pair##*:}
    if [ ! -d "$from" ] || [ -L "$from" ]; then continue; fi
    mkdir -p "$to"
    cp -alf "$from/." "$to/"
    rm -rf "$from"
  done
  cp -alf "$root/." "$out/"
  rm -rf "$root"
}

build_tree() {
  local out=$1 line name arch version
  need_tools dpkg-deb
  { deb_lines debian amd64; deb_lines debian arm64; deb_lines cuda amd64; deb_lines cuda arm64; } | fetch_debs
  for set in debian cuda; do
    for arch in amd64 arm64; do
      while read -r line; do
        read -r name _ version _ _ <<<"$line"
        mkdir -p "$out/.unpack/$name" "$out/$arch/$name"
        dpkg-deb -x "$(deb_file "$name" "$version" "$arch")" "$out/.unpack/$name"
        lay_out "$out/.unpack/$name" "$out/$arch/$name" "$(triplet "$arch")"
      done < <(deb_lines "$set" "$arch")
    done
  done
  rmdir "$out/.unpack"
}

# The Debian mirror this machine's apt uses for bookworm main, for the trixie sources list.
debian_mirror() {
  # shellcheck disable=SC2016 # apt's format fields, not shell expansions
  apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT) $(TARGET_OF)' \
    | awk '$2 == "bookworm" && $3 == "main" && $4 == "deb" { print $1; exit }'
}

build_other_patchelf() {
  local out=$1 apt=$cache/apt-trixie mirror line name version root
  need_tools apt-get dpkg-deb patchelf
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || die "no Debian bookworm main source in apt's configuration"
  mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/sources.list.d"
  printf 'deb %s trixie main\n' "$mirror" >"$apt/sources.list"
  apt_opts+=(-o "Dir::Etc::sourcelist=$apt/sources.list" -o "Dir::Etc::sourceparts=$apt/sources.list.d"
    -o "Dir::State::lists=$apt/lists" -o "Dir::Cache=$apt/cache")
  apt-get "${apt_opts[@]}" -q update >&2
  deb_lines other-patchelf amd64 | fetch_debs
  root=$out/root
  while read -r line; do
    read -r name _ version _ _ <<<"$line"
    dpkg-deb -x "$(deb_file "$name" "$version" amd64)" "$root"
  done < <(deb_lines other-patchelf amd64)
  local libdir=$root/usr/lib/x86_64-linux-gnu final=$cache/patchelf-0.18/root/usr/lib/x86_64-linux-gnu
  [ -e "$libdir/ld-linux-x86-64.so.2" ] || die "no ld-linux-x86-64.so.2 in $libdir"
  mkdir -p "$out/bin"
  cp "$root/usr/bin/patchelf" "$out/bin/patchelf"
  # Its own loader and libraries where this part ends up, found through DT_RPATH (which also covers
  # libstdc++'s needs); until then, started through the loader by hand.
  patchelf --set-interpreter "$final/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$final" "$out/bin/patchelf"
  "$libdir/ld-linux-x86-64.so.2" --library-path "$libdir" "$out/bin/patchelf" --version | grep -q '^patchelf 0\.18' \
    || die "the relocated patchelf does not run"
}

build_read_heads() {
  need_tools gcc
  gcc -O2 -Wall -Wextra -o "$1/read-heads" "$here/read-heads.c"
}

mkdir -p "$cache"
cache=$(cd -- "$cache" && pwd)
exec 9>"$cache/.lock"
flock 9

if wanted tree; then
  build_once tree "$({ declare -f lay_out build_tree; deb_lines debian amd64; deb_lines debian arm64; deb_lines cuda amd64; deb_lines cuda arm64; } | sha)" build_tree
fi
if wanted patchelf-0.18 && [ "$(dpkg --print-architecture)" = amd64 ]; then
  build_once patchelf-0.18 "$({ echo "$cache"; declare -f build_other_patchelf; deb_lines other-patchelf amd64; } | sha)" build_other_patchelf
  "$cache/patchelf-0.18/bin/patchelf" --version >/dev/null || die "$cache/patchelf-0.18/bin/patchelf does not run"
fi
if wanted tools; then
  build_once tools "$({ declare -f build_read_heads; cat "$here/read-heads.c"; } | sha)" build_read_heads
fi
log "ready: $cache${only:+ ($only)}"
