#!/usr/bin/env bash
# The usual one-liner for adding the driver directory, two patchelf processes at a time: every
# library (*.so, *.so.*) and executable file of the tree, one patchelf run each. Files patchelf
# cannot edit (scripts, static programs, linker scripts) make it fail; the one-liner goes on.
#   patchelf-xargs.sh TREE        (PATCHELF=/path/to/patchelf to pick another one)
set -euo pipefail
patchelf=${PATCHELF:-patchelf}
status=0
find "$1" -type f \( -name '*.so' -o -name '*.so.*' -o -perm -u+x \) -print0 \
  | xargs -0 -r -P2 -n1 "$patchelf" --add-rpath /run/opengl-driver/lib 2>/dev/null || status=$?
# 123: some patchelf run failed (see above); anything else is xargs or find failing.
[ "$status" -eq 0 ] || [ "$status" -eq 123 ]
