#!/bin/bash
# v46's device visit: a replayed forward's host time (v45's stages besides). The input-pairs and x-replica probes of
# this visit ran from commit 9184cd7 (their stages: pairs with SET 1 and 3, tests).
# Stages (STAGES), all under $OUT:
#   host      benchmarks/profile_host_v46.py (a replayed forward's event span, bare graph, host time, cProfile)
#   narrow    benchmarks/explore_narrow_groups_v46.py (16-bit B = 10-14 in two groups of 5-7 columns)
#   tests     GPU tests of v46 (REST: more test files, e.g. "$REPO/tests/test_persistent_v30_gpu.py")
#   nbench    benchmarks/bench_narrow_groups_v46.py (the B = 10-14 cells against cuDNN and fused)
#   sanitize  compute-sanitizer memcheck and racecheck over benchmarks/persistent_narrow_groups_small_run.py
#   v45:*     a stage of tools/device_v45.sh (fitreg, b7, odd, sanitize, v44:* (..., v42:* (tests, quick, rest, ...)))
set -u
OUT=${OUT:-/tmp/v46_out}
mkdir -p "$OUT"
for stage in ${STAGES:-host}; do
  case $stage in
    host) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
          timeout "${BENCH_TIMEOUT:-200}" python3 benchmarks/profile_host_v46.py "$OUT" 2>&1 | tail -40 ;;
    narrow) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
            timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/explore_narrow_groups_v46.py "$OUT" --set "${SET:-1}" \
              --rounds "${ROUNDS:-2}" 2>&1 | tail -20 ;;
    tests) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
           run_gpu_tests "$OUT/tests.log" "$REPO/tests/test_persistent_v46_gpu.py" ${REST:-} ;;
    nbench) source benchmarks/device_setup.sh
            timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_narrow_groups_v46.py "$OUT" ${NSET:+--set $NSET} 2>&1 | tail -12 ;;
    sanitize) source benchmarks/device_setup.sh
              run_sanitizers benchmarks/persistent_narrow_groups_small_run.py "$OUT/sanitizers.log" "${SAN_TIMEOUT:-150}" 10 ;;
    v45:*) OUT=$OUT STAGES=${stage#v45:} bash tools/device_v45.sh ;;
  esac
done
