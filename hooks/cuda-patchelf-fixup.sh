# shellcheck shell=bash
# The part the cuda-patchelf setup hooks share; each of them sources this file, it is not a setup hook of
# its own. It keeps the list of the hooks sourced and registers one postFixupHooks entry that runs
# `cuda-patchelf apply` once over every output with all of them: each ELF file is read and written once
# however many hooks there are. cuda-patchelf orders the hooks itself (the cuda_compat directory before the
# driver's, stubs removal last), so the order in which the hook files were sourced does not matter; the
# entry's place among the other postFixupHooks is where the first hook file was sourced, as for any
# Nixpkgs hook: after the derivation's own postFixup and after the hooks registered before it.
#
# The switches are read at fixup time, not when the hooks are sourced, so a derivation may also set them
# in an earlier phase:
#   dontUseAutoAddDriverRunpath, dontUseAutoAddCudaCompatRunpath, dontUseRemoveStubsFromRunpath
#     turn one hook off;
#   cudaPatchelfFlags: more arguments for `cuda-patchelf apply` (a string, or an array with
#     __structuredAttrs), e.g. "--nixpkgs-compat" or "--config hooks.json";
#   CUDA_PATCHELF: the cuda-patchelf command to run (default: the one on PATH);
#   NIX_DEBUG >= 1: say what is sourced, skipped and run.

if [[ -n ${cudaPatchelfFixupOnce-} ]]; then
  return 0
fi
declare -g cudaPatchelfFixupOnce=1

# hook name -> its directory argument ("" for a hook that takes none), for each hook sourced
declare -gA cudaPatchelfHookArgs=()
# hook name -> the variable that turns it off
declare -gA cudaPatchelfHookSwitches=(
  [driver]=dontUseAutoAddDriverRunpath
  [cuda-compat]=dontUseAutoAddCudaCompatRunpath
  [remove-stubs]=dontUseRemoveStubsFromRunpath
)

cudaPatchelfLog() {
  echo "cuda-patchelf hook: $*" >&2
}

cudaPatchelfDebugLog() {
  if (( ${NIX_DEBUG:-0} >= 1 )); then
    cudaPatchelfLog "$@"
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
  # An unfilled placeholder still reads @name@ (this pattern itself is no placeholder: no name in it).
  if [[ -z $value || $value == @*@ ]]; then
    value=${envVar:+${!envVar-}}
    value=${value:-$default}
  fi
  cudaPatchelfHookArgs[$hook]=$value
  cudaPatchelfLog "sourcing the $hook hook${value:+ ($value)}"
  cudaPatchelfDebugLog "the $hook hook was sourced with hostOffset=${hostOffset-unset} targetOffset=${targetOffset-unset}"
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
  local hook switch output cli status=0

  for hook in driver cuda-compat remove-stubs; do
    [[ -v cudaPatchelfHookArgs[$hook] ]] || continue
    switch=${cudaPatchelfHookSwitches[$hook]}
    if [[ -n ${!switch-} ]]; then
      cudaPatchelfLog "the $hook hook is off: $switch is set"
      continue
    fi
    active+=("$hook")
    case $hook in
      driver) args+=(--driver-link "${cudaPatchelfHookArgs[driver]}") ;;
      cuda-compat)
        if [[ -z ${cudaPatchelfHookArgs[cuda-compat]} ]]; then
          cudaPatchelfLog "error: the cuda-compat hook has no cuda_compat directory:" \
            "substitute @cudaCompat@ or set CUDA_PATCHELF_CUDA_COMPAT (or set $switch)"
          return 1
        fi
        args+=(--cuda-compat "${cudaPatchelfHookArgs[cuda-compat]}")
        ;;
      remove-stubs) args+=(--remove-stubs) ;;
    esac
  done
  if (( ${#active[@]} == 0 )); then
    cudaPatchelfLog "every hook is off: nothing to do"
    return 0
  fi
  # The driver hook is on in cuda-patchelf unless turned off.
  [[ " ${active[*]} " == *" driver "* ]] || args+=(--no-driver)

  # shellcheck disable=SC2154 # set by the derivation, if at all
  if [[ "$(declare -p cudaPatchelfFlags 2>/dev/null)" == "declare -a"* ]]; then
    extraFlags=("${cudaPatchelfFlags[@]}")
  else
    read -r -a extraFlags <<< "${cudaPatchelfFlags-}"
  fi

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

  if [[ -n ${CUDA_PATCHELF-} ]]; then
    cli=$CUDA_PATCHELF
  elif ! cli=$(command -v cuda-patchelf); then
    cudaPatchelfLog "error: cuda-patchelf is not on PATH: add it to nativeBuildInputs or set CUDA_PATCHELF"
    return 127
  fi

  cudaPatchelfLog "running cuda-patchelf apply (${active[*]}) over ${#outputDirs[@]} output(s)"
  cudaPatchelfDebugLog "command: ${cli@Q} ${args[*]@Q} ${extraFlags[*]@Q} -- ${outputDirs[*]@Q}"
  "$cli" "${args[@]}" "${extraFlags[@]}" -- "${outputDirs[@]}" || status=$?
  if (( status != 0 )); then
    cudaPatchelfLog "error: cuda-patchelf apply failed with exit code $status (its messages are above)"
    return "$status"
  fi
}

postFixupHooks+=(cudaPatchelfFixup)
cudaPatchelfDebugLog "registered cudaPatchelfFixup in postFixupHooks"
