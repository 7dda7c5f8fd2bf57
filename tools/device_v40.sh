#!/bin/bash
# v40's device visit: the fp32 split forward in batch groups.
# Stages (STAGES), all under $OUT:
#   tests     GPU test files ($TESTS; default the v40 file), TEST_TIMEOUT (default 300)
#   sgroups   benchmarks/explore_split_groups_v40.py (SET, default 1; ROUNDS, default 2)
#   sbench    benchmarks/bench_split_groups_v40.py: the grouped fp32 cells with fused and cuDNN in the process
#   quick     the quick bench (#5's table, cuDNN in the process)
#   rest      more GPU test files ($REST), TEST_TIMEOUT
#   sanitize  compute-sanitizer memcheck and racecheck over benchmarks/persistent_split_groups_small_run.py
#   cache     the NVRTC cache
set -u
OUT=${OUT:-/tmp/v40_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests quick cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v40_gpu.py"} ;;
    sgroups) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/explore_split_groups_v40.py "$OUT" \
      --rounds "${ROUNDS:-2}" --set "${SET:-1}" 2>&1 | tail -30 ;;
    sbench) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_split_groups_v40.py "$OUT" 2>&1 | tail -16 ;;
    quick) timeout "${QUICK_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    rest) run_gpu_tests "$OUT/rest.log" $(for f in ${REST:-}; do echo "$REPO/tests/$f"; done) ;;
    sanitize) run_sanitizers benchmarks/persistent_split_groups_small_run.py "$OUT/sanitizers.log" "${SAN_TIMEOUT:-150}" 10 ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
