#!/bin/bash
# The whole GPU suite in two calls: a cold machine compiles every kernel variant, and the suite in
# one go outran the 10-minute limit (v20, calls 12 and 13). HALF=1 or 2 runs every other test file
# (sorted by name) with -m gpu under SUITE_TIMEOUT; the two halves together are the suite. Log:
# $OUT/suite_$HALF.log (the pytest summary and the slowest tests).
set -u
OUT=${OUT:-/tmp/suite_out}
HALF=${HALF:-1}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt" >/dev/null
files=(); for f in $(ls tests/test_*.py | sort | awk -v h="$HALF" 'NR % 2 == h % 2'); do files+=("$REPO/$f"); done
(cd /tmp && timeout "${SUITE_TIMEOUT:-540}" python3 -m pytest -q -m gpu -rfEs --durations=8 --import-mode=append \
  -p no:cacheprovider --rootdir "$REPO" "${files[@]}" > "$OUT/suite_$HALF.full.log" 2>&1
 echo "pytest exit: $? (124: timeout)" >> "$OUT/suite_$HALF.full.log")
grep -v "moduleUnload\|check_status\|Exception ignored\|NoneType\|excepthook\|Original exception\|^Traceback\|^$" \
  "$OUT/suite_$HALF.full.log" | tail -40 > "$OUT/suite_$HALF.log"
tail -${TAIL:-20} "$OUT/suite_$HALF.log"
