# shellcheck shell=bash
# The part the cuda-patchelf setup hooks share; each of them sources this file, it is not a setup hook of
# its own. It keeps the list of the hooks sourced and registers one postFixupHooks entry that runs
# `cuda-patchelf apply` once over every output with all of them: each ELF file is read and written once
# however many hooks there are. cuda-patchelf orders the hooks itself (auto-patchelf's directories first,
# then the cuda_compat directory before the driver's, stubs removal last), so the order in which the hook
# files were sourced does not matter; the entry's place among the other postFixupHooks is where the first hook file was sourced, as for any
# Nixpkgs hook: after the derivation's own postFixup and after the hooks registered before it.
#
# The switches are read at fixup time, not when the hooks are sourced, so a derivation may also set them
# in an earlier phase:
#   dontAutoPatchelf, dontUseAutoAddDriverRunpath (or the deprecated dontUseAutoAddOpenGLRunpath),
#   dontUseAutoAddCudaCompatRunpath, dontUseRemoveStubsFromRunpath
#     turn one hook off (auto-patchelf.sh names the other variables its hook reads);
#   cudaPatchelfFlags: more arguments for `cuda-patchelf apply` (a string, or an array with
#     __structuredAttrs), e.g. "--nixpkgs-compat" or "--config hooks.json"; they come last, so they win;
#   CUDA_PATCHELF: the cuda-patchelf command to run (default: the one filled in at install time, else the
#     one on PATH);
#   NIX_BUILD_CORES: the build's cores; cuda-patchelf patches with half as many threads, at least 1 (0, or
#     unset: its own default, half the CPUs);
#   NIX_DEBUG >= 1: say what is sourced, skipped and run, and one line per file patched.
#
# Messages go through stdenv's nixLog and nixErrorLog when it has them (and a log to write to), as the
# Nixpkgs hooks' do; else to stderr.

if [[ -n ${cudaPatchelfFixupOnce-} ]]; then
  return 0
fi
declare -g cudaPatchelfFixupOnce=1

# hook name -> its directory argument ("" for a hook that takes none), for each hook sourced
declare -gA cudaPatchelfHookArgs=()
# hook name -> the variables that turn it off (any one of them set is enough)
declare -gA cudaPatchelfHookSwitches=(
  [auto-patchelf]=dontAutoPatchelf
  [driver]="dontUseAutoAddDriverRunpath dontUseAutoAddOpenGLRunpath"
  [cuda-compat]=dontUseAutoAddCudaCompatRunpath
  [remove-stubs]=dontUseRemoveStubsFromRunpath
)
# the cuda-patchelf command filled in at install time by the first hook that had one
declare -g cudaPatchelfInstalledCli=
# set once the deprecation of dontUseAutoAddOpenGLRunpath has been said
declare -g cudaPatchelfOpenGLSwitchSaid=

# stdenv's nixLog family writes to NIX_LOG_FD and is silent without it (nix-shell): then stderr it is, so
# that no message of ours is ever lost.
cudaPatchelfHasNixLog() {
  declare -F "$1" >/dev/null && [[ -n ${NIX_LOG_FD-} ]]
}

cudaPatchelfLog() {
  if cudaPatchelfHasNixLog nixLog; then
    nixLog "cuda-patchelf hook: $*"
  else
    echo "cuda-patchelf hook: $*" >&2
  fi
}

cudaPatchelfErrorLog() {
  if cudaPatchelfHasNixLog nixErrorLog; then
    nixErrorLog "cuda-patchelf hook: error: $*"
  else
    echo "cuda-patchelf hook: error: $*" >&2
  fi
}

# At NIX_DEBUG >= 1, the level at which Nixpkgs' autoFixElfFiles names each file it fixes. (nixDebugLog
# would hide these lines below NIX_DEBUG=6.)
cudaPatchelfDebugLog() {
  if (( ${NIX_DEBUG:-0} >= 1 )); then
    cudaPatchelfLog "$@"
  fi
}

# cudaPatchelfFilled VALUE: VALUE is a placeholder that makeSetupHook filled in (an unfilled one still
# reads @name@; this pattern itself is no placeholder: no name in it).
cudaPatchelfFilled() {
  [[ $1 != @*@ ]]
}

# cudaPatchelfUseCli VALUE: the hook file's @cudaPatchelf@, the cuda-patchelf it was installed with. A
# filled-in command is found whatever list the hook and cuda-patchelf are inputs in: under strictDeps only
# build-platform inputs reach PATH.
cudaPatchelfUseCli() {
  if [[ -z $cudaPatchelfInstalledCli && -n $1 ]] && cudaPatchelfFilled "$1"; then
    cudaPatchelfInstalledCli=$1
  fi
}

# cudaPatchelfAddHook HOOK [SUBSTITUTED ENV_VAR DEFAULT]
# Records that the hook file of HOOK was sourced, with its directory argument: SUBSTITUTED when the
# placeholder was filled at install time (makeSetupHook), else $ENV_VAR, else DEFAULT. A second call for
# the same hook (the hook file sourced again, e.g. propagated by several inputs) changes nothing.
cudaPatchelfAddHook() {
  local hook=$1 value=${2-} envVar=${3-} default=${4-}
  if [[ -v cudaPatchelfHookArgs[$hook] ]]; then
    cudaPatchelfDebugLog "skipping the $hook hook: already sourced"
    return 0
  fi
  if [[ -z $value ]] || ! cudaPatchelfFilled "$value"; then
    value=${envVar:+${!envVar-}}
    value=${value:-$default}
  fi
  cudaPatchelfHookArgs[$hook]=$value
  cudaPatchelfLog "sourcing the $hook hook${value:+ ($value)}"
  cudaPatchelfDebugLog "the $hook hook was sourced with hostOffset=${hostOffset-unset} targetOffset=${targetOffset-unset}"
}

# cudaPatchelfSwitchedOff HOOK: succeeds, naming the switch, when a switch of HOOK is set.
cudaPatchelfSwitchedOff() {
  local switch
  for switch in ${cudaPatchelfHookSwitches[$1]}; do
    if [[ -n ${!switch-} ]]; then
      echo "$switch"
      return 0
    fi
  done
  return 1
}

# Nixpkgs' driver hook says this whenever the old switch is set, whether or not it decides anything.
cudaPatchelfSayOpenGLSwitch() {
  if [[ -n ${dontUseAutoAddOpenGLRunpath-} && -z $cudaPatchelfOpenGLSwitchSaid ]]; then
    cudaPatchelfOpenGLSwitchSaid=1
    cudaPatchelfLog "dontUseAutoAddOpenGLRunpath has been deprecated, please use dontUseAutoAddDriverRunpath instead"
  fi
}

# cudaPatchelfListOf NAME ARRAY: the derivation's variable NAME as a list in ARRAY: its elements when it is
# an array (__structuredAttrs), else its words; empty when NAME is unset.
cudaPatchelfListOf() {
  local -n cudaPatchelfListInto=$2
  if [[ "$(declare -p "$1" 2>/dev/null)" == "declare -a"* ]]; then
    local -n cudaPatchelfListFrom=$1
    cudaPatchelfListInto=(${cudaPatchelfListFrom[@]+"${cudaPatchelfListFrom[@]}"})
  else
    # -d '': every line, not the first; read then reports the end of its input, which is no error here.
    read -r -d '' -a cudaPatchelfListInto <<< "${!1-}" || true
  fi
}

cudaPatchelfOutputNames() {
  if declare -F getAllOutputNames >/dev/null; then
    getAllOutputNames
  else
    echo "${outputs:-out}"
  fi
}

# The postFixupHooks entry: one `cuda-patchelf apply` over every output that exists. --make-writable
# because the outputs are the build's own files: one that a step left read-only (install -m 0555) is
# patched all the same and keeps its mode.
cudaPatchelfFixup() {
  local -a args=(apply --make-writable) active=() extraFlags=() outputDirs=()
  local hook switch output cli driverLink=

  [[ ! -v cudaPatchelfHookArgs[driver] ]] || cudaPatchelfSayOpenGLSwitch
  for hook in auto-patchelf driver cuda-compat remove-stubs; do
    [[ -v cudaPatchelfHookArgs[$hook] ]] || continue
    if switch=$(cudaPatchelfSwitchedOff "$hook"); then
      cudaPatchelfLog "the $hook hook is off: $switch is set"
      continue
    fi
    active+=("$hook")
    case $hook in
      auto-patchelf)
        cudaPatchelfAutoPatchelfArgs args
        ;;
      driver)
        driverLink=${cudaPatchelfHookArgs[driver]}
        args+=(--driver-link "$driverLink")
        ;;
      cuda-compat)
        if [[ -z ${cudaPatchelfHookArgs[cuda-compat]} ]]; then
          cudaPatchelfErrorLog "the cuda-compat hook has no cuda_compat directory:" \
            "substitute @cudaCompat@ or set CUDA_PATCHELF_CUDA_COMPAT (or set dontUseAutoAddCudaCompatRunpath)"
          return 1
        fi
        args+=(--cuda-compat "${cudaPatchelfHookArgs[cuda-compat]}")
        ;;
      remove-stubs)
        args+=(--remove-stubs)
        # Nixpkgs' stubs hook puts the driver directory in place of the first stubs entry, driver hook or
        # not: with the driver hook off, the stubs hook's own driver link names it.
        if [[ -z $driverLink ]]; then
          args+=(--driver-link "${cudaPatchelfHookArgs[remove-stubs]}")
        elif [[ $driverLink != "${cudaPatchelfHookArgs[remove-stubs]}" ]]; then
          cudaPatchelfLog "warning: the driver hook's driver link ($driverLink) replaces the stubs entries," \
            "not the stubs hook's (${cudaPatchelfHookArgs[remove-stubs]})"
        fi
        ;;
    esac
  done
  if (( ${#active[@]} == 0 )); then
    cudaPatchelfLog "every hook is off: nothing to do"
    return 0
  fi
  # The driver hook is on in cuda-patchelf unless turned off.
  [[ " ${active[*]} " == *" driver "* ]] || args+=(--no-driver)

  cudaPatchelfBuildFlags args
  cudaPatchelfListOf cudaPatchelfFlags extraFlags

  for output in $(cudaPatchelfOutputNames); do
    if [[ -e ${!output-} ]]; then
      outputDirs+=("${!output}")
    else
      cudaPatchelfDebugLog "output $output (${!output-unset}) does not exist: skipped"
    fi
  done
  if (( ${#outputDirs[@]} == 0 )); then
    cudaPatchelfLog "no output exists yet: nothing to do"
    return 0
  fi

  cli=$(cudaPatchelfCli) || return "$?"
  cudaPatchelfLog "running cuda-patchelf apply (${active[*]}) over ${#outputDirs[@]} output(s)"
  cudaPatchelfDebugLog "command: ${cli@Q} ${args[*]@Q} ${extraFlags[*]@Q} -- ${outputDirs[*]@Q}"
  cudaPatchelfRun "$cli" "${args[@]}" "${extraFlags[@]}" -- "${outputDirs[@]}"
}

# cudaPatchelfBuildFlags ARRAY: appends to ARRAY the flags for the build's parallelism and debug level.
cudaPatchelfBuildFlags() {
  local -n cudaPatchelfBuildFlagsInto=$1
  # stdenv's parallelism, the cores this build may use; 0 means every core (setup.sh normally turns it
  # into a count already), which cuda-patchelf's own default covers. A patching thread keeps about 1.5
  # cores busy, so cuda-patchelf's default is half the CPUs (docs/benchmarks.md, Threads): the same rule
  # applied to the build's cores, half of them, at least 1.
  if [[ ${NIX_BUILD_CORES-} =~ ^[0-9]+$ ]] && (( NIX_BUILD_CORES > 0 )); then
    cudaPatchelfBuildFlagsInto+=(--jobs "$(( NIX_BUILD_CORES > 1 ? NIX_BUILD_CORES / 2 : 1 ))")
  fi
  if (( ${NIX_DEBUG:-0} >= 1 )); then
    cudaPatchelfBuildFlagsInto+=(--verbose)
  fi
}

# cudaPatchelfCli: the cuda-patchelf command to run, on stdout; an error (127) when there is none.
cudaPatchelfCli() {
  if [[ -n ${CUDA_PATCHELF-} ]]; then
    echo "$CUDA_PATCHELF"
  elif [[ -n $cudaPatchelfInstalledCli ]]; then
    echo "$cudaPatchelfInstalledCli"
  elif ! command -v cuda-patchelf; then
    cudaPatchelfErrorLog "cuda-patchelf is not on PATH: add it to nativeBuildInputs or set CUDA_PATCHELF"
    return 127
  fi
}

# cudaPatchelfRun CLI apply ARGUMENT...: runs it, and when it fails says so with its exit code, and
# returns that.
cudaPatchelfRun() {
  local status=0
  "$@" || status=$?
  if (( status != 0 )); then
    cudaPatchelfErrorLog "cuda-patchelf apply failed with exit code $status (its messages are above)"
    # Exit code 3 is also what a library that the resolver found nowhere gives.
    if (( status == 3 )) && [[ " ${*:2} " == *" --auto-patchelf "* ]]; then
      cudaPatchelfErrorLog "for a library not found: add the package that holds it to buildInputs," \
        "or name it in autoPatchelfIgnoreMissingDeps"
    fi
    return "$status"
  fi
}

postFixupHooks+=(cudaPatchelfFixup)
cudaPatchelfDebugLog "registered cudaPatchelfFixup in postFixupHooks"
