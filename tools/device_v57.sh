#!/bin/bash
# v57's device visit; results under $OUT.
# STAGES (default "intercept quick"; also prologue, early, tests, ab, layers, san, cache; call 6's sass stage: commit 16a00fb)
# FILES (test files), ROUNDS (A/B rounds).
source benchmarks/device_setup.sh
OUT=${OUT:-/tmp/v57_out}; mkdir -p "$OUT"
record_device "$OUT/device.txt"
for stage in ${STAGES:-intercept quick}; do
  case $stage in
    intercept) python3 benchmarks/diag_intercept_v57.py "$OUT" --cells ${CELLS:-float32:1024:8,float16:1024:16} \
          --steps ${STEPS_LIST:-16,64,256} 2>&1 | grep -v "^{\|arn" | tail -40 ;;
    prologue) python3 benchmarks/diag_prologue_v57.py "$OUT" --cells ${CELLS:-float32:1024:8,float32:1024:4,float16:1024:16} \
          2>&1 | grep -v "^{\|arn" | tail -12 ;;
    early) python3 benchmarks/diag_early_steps_v57.py "$OUT" --cells ${CELLS:-float32:1024:8,float32:1024:4,float16:1024:16} ${EARLY_ARGS:-} \
          2>&1 | grep -v "^{\|arn" | tail -12 ;;
    tests) TEST_TIMEOUT=${TEST_TIMEOUT:-400} run_gpu_tests "$OUT/tests.log" ${FILES:-$REPO/tests/test_persistent_v57_gpu.py} ;;
    ab) (cd benchmarks && python3 ab_alternate.py "$OUT" ${AB:-bench_persistent_v57} --rounds ${ROUNDS:-6} \
          --name ${AB_NAME:-ab_alternate_v57} 2>&1 | grep -v "^{" | tail -20) ;;
    layers) python3 benchmarks/diag_replay_layers_v56.py "$OUT" --cells ${CELLS:-float32:1024:8,float16:1024:16} \
          2>&1 | grep -v "^{\|arn" | tail -16 ;;
    quick) python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | grep -v "^{" | tail -16 ;;
    san) SAN_TIMEOUT=${SAN_TIMEOUT:-300} run_sanitizers ${SAN_SCRIPT:-benchmarks/persistent_in_place_small_run.py} "$OUT/sanitizer.log" 300 ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
