#!/bin/bash
# The whole GPU suite in two calls: a cold machine compiles every kernel variant, and the suite in
# one go outran the 10-minute limit (v20, calls 12 and 13). PART=k of OF=n runs test files k, k+n,
# k+2n, ... (sorted by name) with -m gpu under SUITE_TIMEOUT; the n parts together are the suite
# (n=2: halves; v21 ran part 1 of 2, then parts 2 and 4 of 4). Log: $OUT/suite_$PART.log (the pytest
# summary and the slowest tests).
set -u
OUT=${OUT:-/tmp/suite_out}
PART=${PART:-1}
OF=${OF:-2}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt" >/dev/null
files=(); for f in $(ls tests/test_*.py | sort | awk -v k="$PART" -v n="$OF" '(NR - 1) % n == k - 1'); do files+=("$REPO/$f"); done
(cd /tmp && timeout "${SUITE_TIMEOUT:-540}" python3 -m pytest -q -m gpu -rfEs --durations=8 --import-mode=append \
  -p no:cacheprovider --rootdir "$REPO" "${files[@]}" > "$OUT/suite_$PART.full.log" 2>&1
 echo "pytest exit: $? (124: timeout)" >> "$OUT/suite_$PART.full.log")
grep -v "moduleUnload\|check_status\|Exception ignored\|NoneType\|excepthook\|Original exception\|^Traceback\|^$" \
  "$OUT/suite_$PART.full.log" | tail -40 > "$OUT/suite_$PART.log"
tail -${TAIL:-20} "$OUT/suite_$PART.log"
