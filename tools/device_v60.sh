#!/bin/bash
# v60's device visit; results under $OUT. STAGES (default "tests lean quick"): tests (FILES: v60 and the replay
# tests), lean (diag_lean_replay_v60: forward, v59's host path, the stand-in, the bare graph, alternated), phase
# (diag_bench_phase_v60), quick (the quick bench), cache (CuPy's cache for the next visit); v61: ab (ab_alternate.py
# over AB_MODULE, ROUNDS x REPEATS).
source benchmarks/device_setup.sh
OUT=${OUT:-/tmp/v60_out}; mkdir -p "$OUT"
record_device "$OUT/device.txt"
FILES=${FILES:-"$REPO/tests/test_persistent_v60_gpu.py $REPO/tests/test_persistent_v20_gpu.py $REPO/tests/test_persistent_v56_gpu.py"}
for stage in ${STAGES:-tests lean quick}; do
  case $stage in
    tests) TEST_TIMEOUT=${TEST_TIMEOUT:-300} run_gpu_tests "$OUT/tests.log" $FILES ;;
    lean) (cd benchmarks && python3 diag_lean_replay_v60.py "$OUT" --rounds ${ROUNDS:-8} 2>&1 | grep -v "^{" | tail -7) ;;
    ab) (cd benchmarks && python3 ab_alternate.py "$OUT" ${AB_MODULE:?} --rounds ${ROUNDS:-8} --repeats ${REPEATS:-100} \
          --name "ab_alternate_${AB_MODULE#bench_persistent_}" 2>&1 | grep -v "^{" | tail -6) ;;
    phase) (cd benchmarks && python3 diag_bench_phase_v60.py "$OUT" 2>&1 | grep -v "^{" | tail -5) ;;
    quick) python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | grep -v "^{" | tail -16 ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
