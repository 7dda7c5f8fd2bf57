#!/bin/bash
# v59's device visit; results under $OUT.
# STAGES (default "tests ab"; also train, quick, san, cache); FILES (test files), ROUNDS (A/B rounds).
source benchmarks/device_setup.sh
OUT=${OUT:-/tmp/v59_out}; mkdir -p "$OUT"
record_device "$OUT/device.txt"
for stage in ${STAGES:-tests ab}; do
  case $stage in
    tests) TEST_TIMEOUT=${TEST_TIMEOUT:-400} run_gpu_tests "$OUT/tests.log" ${FILES:-$REPO/tests/test_persistent_v59_gpu.py} ;;
    ab) (cd benchmarks && python3 ab_alternate.py "$OUT" ${AB:-bench_persistent_v59} --rounds ${ROUNDS:-4} \
          --name ${AB_NAME:-ab_alternate_v59} 2>&1 | grep -v "^{" | tail -20) ;;
    train) (cd benchmarks && python3 ab_train_v52.py "$OUT" --set ${TRAIN_SET:-v58} --rounds ${ROUNDS:-4} 2>&1 | grep -v "^{" | tail -8) ;;
    quick) python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | grep -v "^{" | tail -16 ;;
    san) SAN_TIMEOUT=${SAN_TIMEOUT:-300} run_sanitizers ${SAN_SCRIPT:-benchmarks/persistent_prologue_small_run.py} "$OUT/sanitizer.log" 300 ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
