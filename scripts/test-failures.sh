#!/usr/bin/env bash
# Prints every failed test of the given TAP logs (node --test output) with the lines of its
# diagnostic that say why, so the end of a long run names what failed. Usage:
#   scripts/test-failures.sh <tap-log>...   (missing files are skipped; exit 0 always)
set -uo pipefail
found=0
for log in "$@"; do
  [ -f "$log" ] || continue
  # A failed test: its "not ok" line and, from its YAML block, the error, the failure type and
  # the first lines of the stack up to the block's end.
  out=$(awk '
    /^ *not ok / { show = 1; n = 0; print; next }
    show && /^ *\.\.\.$/ { show = 0; print "  ----"; next }
    show { if (n++ < 24) print }
  ' "$log")
  if [ -n "$out" ]; then
    found=1
    echo "# ---- failed in $log ----"
    echo "$out"
  fi
done
[ "$found" -eq 1 ] || echo "# no failed test in: $*"
exit 0
