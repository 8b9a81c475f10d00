# Wall-clock timing for the whole-process benchmark scripts (sourced, not run).

# ms COMMAND...: runs it, output discarded, and prints its wall time in ms.
ms() {
  local start
  start=$(date +%s%N)
  "$@" >/dev/null 2>&1
  echo $((($(date +%s%N) - start) / 1000000))
}

# median NUMBER...: the middle one (the lower of the two middle ones for an even count).
median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
