# shellcheck shell=bash source-path=SCRIPTDIR
# Setup hook, a drop-in for Nixpkgs' autoPatchelfHook: finds the libraries that each dynamic ELF file of
# every output needs (DT_NEEDED, then .note.dlopen) in the outputs themselves, in the lib/ directory of
# each dependency and in the directories given to addAutoPatchelfSearchPath, puts their directories in the
# file's runpath (keeping its $ORIGIN entries) and gives every program the build's interpreter; through the
# one `cuda-patchelf apply --auto-patchelf` run that cuda-patchelf-fixup.sh registers in postFixupHooks,
# which does the driver, cuda_compat and stubs hooks in the same pass, whatever order the hook files were
# sourced in. A library found nowhere fails the build, naming it (cuda-patchelf exits 3), unless
# autoPatchelfIgnoreMissingDeps matches its name.
#
# Read at fixup time, as Nixpkgs' hook reads them (a string of words, or an array with __structuredAttrs):
#   dontAutoPatchelf               turns the hook off;
#   autoPatchelfIgnoreMissingDeps  shell patterns of library names that may be missing (`true`, that is 1:
#                                  all of them, as "*", with Nixpkgs' deprecation warning);
#   runtimeDependencies            packages whose lib/ goes first in the runpath of every program and
#                                  library that has an interpreter;
#   appendRunpaths                 directories that go last in every file's resolved list;
#   autoPatchelfFlags              more arguments for cuda-patchelf's resolver (--keep-libc, --libs DIR...;
#                                  --preserve-origin is what its default semantics do anyway, and is
#                                  dropped; under --nixpkgs-compat the runpath is replaced whole);
#   NIX_BINTOOLS                   nix-support/dynamic-linker, the interpreter to set, and nix-support/orig-libc,
#                                  whose lib/ holds the libc libraries that need no runpath entry.
# patchelfFlags, the extra arguments Nixpkgs' hook gives patchelf, are not read: cuda-patchelf writes the
# files itself (a line says so when they are set). autoPatchelf PATH... runs the resolver by hand.
#
# Filled at install time (makeSetupHook substitutions), or else:
#   @cudaPatchelf@       the cuda-patchelf command; else $CUDA_PATCHELF, else the one on PATH
#   @cudaPatchelfFixup@  the path of cuda-patchelf-fixup.sh; else the one next to this file

cudaPatchelfFixupScript="@cudaPatchelfFixup@"
if [[ $cudaPatchelfFixupScript == @*@ ]]; then
  cudaPatchelfFixupScript=$(dirname -- "${BASH_SOURCE[0]}")/cuda-patchelf-fixup.sh
fi
# shellcheck source=cuda-patchelf-fixup.sh
source "$cudaPatchelfFixupScript"
unset cudaPatchelfFixupScript

# The names of Nixpkgs' hook, which derivations read and add to: each dependency's lib/, and the
# directories addAutoPatchelfSearchPath found.
declare -ga autoPatchelfLibs extraAutoPatchelfLibs
# the target offsets that cudaPatchelfGatherLibraries is registered for
declare -gA cudaPatchelfLibraryOffsets

# cudaPatchelfAppendOnce ARRAY VALUE: VALUE at the end of ARRAY unless it is there already.
cudaPatchelfAppendOnce() {
  local -n cudaPatchelfOnceList=$1
  local existing
  for existing in ${cudaPatchelfOnceList[@]+"${cudaPatchelfOnceList[@]}"}; do
    [[ $existing != "$2" ]] || return 0
  done
  cudaPatchelfOnceList+=("$2")
}

# The env hook: stdenv calls it with each dependency of the offset it was registered for. Only a lib/
# that exists is kept (cuda-patchelf would skip the others), each once.
cudaPatchelfGatherLibraries() {
  if [[ -d $1/lib ]]; then
    cudaPatchelfAppendOnce autoPatchelfLibs "$1/lib"
  fi
}

# As Nixpkgs' hook does, the dependencies whose libraries count are those of the offset the hook file is
# sourced with (from nativeBuildInputs: buildInputs and depsHostHost, or every input without strictDeps);
# once per offset however often the file is sourced.
if [[ ! -v cudaPatchelfLibraryOffsets[${targetOffset:-0}] ]] && declare -F addEnvHooks >/dev/null; then
  cudaPatchelfLibraryOffsets[${targetOffset:-0}]=1
  addEnvHooks "${targetOffset:-0}" cudaPatchelfGatherLibraries
fi

# addAutoPatchelfSearchPath [--no-recurse] [--] PATH...: the directories under each PATH (not below it
# with --no-recurse) that hold a file or link named *.so or *.so.*, for this build's resolver, as Nixpkgs'
# function of that name; a derivation calls it in a phase before fixup. Found in byte order of the paths,
# so that the order does not depend on the file system.
addAutoPatchelfSearchPath() {
  local -a findOptions=()
  local file
  while (( $# > 0 )); do
    case $1 in
      --) shift; break ;;
      --no-recurse) shift; findOptions+=(-maxdepth 1) ;;
      --*)
        cudaPatchelfErrorLog "addAutoPatchelfSearchPath: unknown option $1"
        return 1
        ;;
      *) break ;;
    esac
  done
  while IFS= read -r -d '' file; do
    cudaPatchelfAppendOnce extraAutoPatchelfLibs "${file%/*}"
  done < <(find "$@" "${findOptions[@]}" ! -type d \( -name '*.so' -o -name '*.so.*' \) -print0 | LC_ALL=C sort -z)
}

# cudaPatchelfAutoPatchelfArgs ARRAY: appends to ARRAY the arguments of `cuda-patchelf apply` that turn the
# resolver on with this build's settings.
cudaPatchelfAutoPatchelfArgs() {
  local -n cudaPatchelfArgsInto=$1
  local -a ignoreMissing=() runtimeDependenciesList=() appendRunpathsList=() flags=() patchelfFlagsList=()
  local item nixSupport=${NIX_BINTOOLS-}/nix-support libc

  cudaPatchelfArgsInto+=(--auto-patchelf)
  if [[ -n ${NIX_BINTOOLS-} && -f $nixSupport/dynamic-linker ]]; then
    cudaPatchelfArgsInto+=(--interpreter "$(<"$nixSupport/dynamic-linker")")
    if [[ -f $nixSupport/orig-libc ]]; then
      libc=$(<"$nixSupport/orig-libc")/lib
      if [[ -d $libc ]]; then cudaPatchelfArgsInto+=(--libc-dir "$libc"); fi
    fi
  else
    cudaPatchelfLog "auto-patchelf: NIX_BINTOOLS (${NIX_BINTOOLS:-unset}) has no nix-support/dynamic-linker:" \
      "the interpreters are left as they are, and libc is looked for like any other library"
  fi

  for item in ${autoPatchelfLibs[@]+"${autoPatchelfLibs[@]}"} ${extraAutoPatchelfLibs[@]+"${extraAutoPatchelfLibs[@]}"}; do
    cudaPatchelfArgsInto+=(--libs "$item")
  done

  cudaPatchelfListOf runtimeDependencies runtimeDependenciesList
  for item in ${runtimeDependenciesList[@]+"${runtimeDependenciesList[@]}"}; do
    cudaPatchelfArgsInto+=(--runtime-dependencies "$item/lib")
  done

  cudaPatchelfListOf appendRunpaths appendRunpathsList
  for item in ${appendRunpathsList[@]+"${appendRunpathsList[@]}"}; do
    cudaPatchelfArgsInto+=(--append-rpaths "$item")
  done

  # `autoPatchelfIgnoreMissingDeps = true;` reaches the builder as 1: everything, and deprecated.
  cudaPatchelfListOf autoPatchelfIgnoreMissingDeps ignoreMissing
  for item in ${ignoreMissing[@]+"${ignoreMissing[@]}"}; do
    if [[ $item == 1 || $item == true ]]; then
      cudaPatchelfLog "warning: setting 'autoPatchelfIgnoreMissingDeps = true;' is deprecated and will be removed" \
        "in a future release. Use 'autoPatchelfIgnoreMissingDeps = [ \"*\" ];' instead."
      ignoreMissing=('*')
      break
    fi
  done
  for item in ${ignoreMissing[@]+"${ignoreMissing[@]}"}; do
    cudaPatchelfArgsInto+=(--ignore-missing "$item")
  done

  cudaPatchelfListOf autoPatchelfFlags flags
  for item in ${flags[@]+"${flags[@]}"}; do
    if [[ $item == --preserve-origin ]]; then
      cudaPatchelfDebugLog "auto-patchelf: --preserve-origin dropped: cuda-patchelf keeps the \$ORIGIN entries anyway"
    else
      cudaPatchelfArgsInto+=("$item")
    fi
  done

  cudaPatchelfListOf patchelfFlags patchelfFlagsList
  if (( ${#patchelfFlagsList[@]} > 0 )); then
    cudaPatchelfLog "auto-patchelf: patchelfFlags (${patchelfFlagsList[*]}) are not read: cuda-patchelf writes the files without patchelf"
  fi
}

# autoPatchelf [--no-recurse] [--] PATH...: the resolver alone, now, over each PATH (a tree or a file), as
# Nixpkgs' command of that name, for a derivation that sets dontAutoPatchelf and patches some paths
# itself; with --no-recurse, over the files directly in each directory PATH. The same settings as the
# hook's run, and cudaPatchelfFlags; no driver hook: as with Nixpkgs' command, the driver's libraries are
# looked for like any other.
autoPatchelf() {
  local -a args=(apply --make-writable --no-driver) extraFlags=() paths=()
  local noRecurse= cli path file
  while (( $# > 0 )); do
    case $1 in
      --) shift; break ;;
      --no-recurse) shift; noRecurse=1 ;;
      --*)
        cudaPatchelfErrorLog "autoPatchelf: unknown option $1"
        return 1
        ;;
      *) break ;;
    esac
  done
  for path in "$@"; do
    if [[ -z $noRecurse || ! -d $path ]]; then
      paths+=("$path")
      continue
    fi
    # cuda-patchelf walks a directory whole: the files in it, one by one.
    while IFS= read -r -d '' file; do
      paths+=("$file")
    done < <(find "$path" -mindepth 1 -maxdepth 1 -type f -print0 | LC_ALL=C sort -z)
  done
  if (( ${#paths[@]} == 0 )); then
    cudaPatchelfLog "autoPatchelf: no file to patch in ${*:-no path}"
    return 0
  fi

  cudaPatchelfAutoPatchelfArgs args
  cudaPatchelfBuildFlags args
  cudaPatchelfListOf cudaPatchelfFlags extraFlags
  cli=$(cudaPatchelfCli) || return "$?"
  cudaPatchelfLog "autoPatchelf: running cuda-patchelf apply --auto-patchelf over ${#paths[@]} path(s)"
  cudaPatchelfDebugLog "command: ${cli@Q} ${args[*]@Q} ${extraFlags[*]@Q} -- ${paths[*]@Q}"
  cudaPatchelfRun "$cli" "${args[@]}" "${extraFlags[@]}" -- "${paths[@]}"
}

cudaPatchelfUseCli "@cudaPatchelf@"
cudaPatchelfAddHook auto-patchelf
