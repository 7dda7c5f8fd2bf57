#!/bin/bash
# v56's device visit: GPU tests of the replay path, the in-place outputs A/B, the host layers; results under $OUT.
# STAGES (default "tests ab layers"; also quick, san, cache), FILES (test files), ROUNDS (A/B rounds).
source benchmarks/device_setup.sh
OUT=${OUT:-/tmp/v56_out}; mkdir -p "$OUT"
record_device "$OUT/device.txt"
for stage in ${STAGES:-tests ab layers}; do
  case $stage in
    tests) TEST_TIMEOUT=${TEST_TIMEOUT:-400} run_gpu_tests "$OUT/tests.log" ${FILES:-$REPO/tests/test_persistent_v56_gpu.py} ;;
    ab) (cd benchmarks && python3 ab_alternate.py "$OUT" ${AB:-bench_persistent_v56} --rounds ${ROUNDS:-6} \
          --name ${AB_NAME:-ab_alternate_v56} 2>&1 | grep -v "^{" | tail -20) ;;
    layers) python3 benchmarks/diag_replay_layers_v56.py "$OUT" --cells ${CELLS:-float32:1024:8,float16:1024:16} \
          2>&1 | grep -v "^{\|arn" | tail -16 ;;
    quick) python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | grep -v "^{" | tail -16 ;;
    san) SAN_TIMEOUT=${SAN_TIMEOUT:-300} run_sanitizers benchmarks/persistent_in_place_small_run.py "$OUT/sanitizer.log" 300 ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
