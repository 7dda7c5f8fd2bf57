#!/bin/bash
# v46's device visit: the 16-bit forwards staging x of two steps at a time (v45's stages besides).
# Stages (STAGES), all under $OUT:
#   pairs     benchmarks/explore_input_pairs_v46.py (SET, default 1; ROUNDS, default 3)
#   host      benchmarks/profile_host_v46.py (a replayed forward's host time, cProfile)
#   tests     GPU tests of v46 (REST adds more test files)
#   v45:*     a stage of tools/device_v45.sh (fitreg, b7, odd, sanitize, v44:* (..., v42:* (tests, quick, rest, ...)))
set -u
OUT=${OUT:-/tmp/v46_out}
mkdir -p "$OUT"
for stage in ${STAGES:-tests pairs}; do
  case $stage in
    pairs) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
           timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/explore_input_pairs_v46.py "$OUT" --set "${SET:-1}" \
             --rounds "${ROUNDS:-3}" 2>&1 | tail -30 ;;
    tests) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
           run_gpu_tests "$OUT/tests.log" "$REPO/tests/test_persistent_v46_gpu.py" ${REST:-} ;;
    host) source benchmarks/device_setup.sh
          timeout "${BENCH_TIMEOUT:-200}" python3 benchmarks/profile_host_v46.py "$OUT" 2>&1 | tail -40 ;;
    v45:*) OUT=$OUT STAGES=${stage#v45:} bash tools/device_v45.sh ;;
  esac
done
