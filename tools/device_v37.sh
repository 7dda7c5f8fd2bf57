#!/bin/bash
# v37's device visit (the forward step's clock marks).
# Stages (STAGES), all under $OUT:
#   tests     GPU test files ($TESTS; default the v37 file), TEST_TIMEOUT (default 300)
#   clocks    the step-clock diagnostic (diag_step_clocks_v37.py)
#   quick     the quick bench (#5's table, cuDNN in the process)
#   rest      more GPU test files ($REST), TEST_TIMEOUT
#   cache     the NVRTC cache
set -u
OUT=${OUT:-/tmp/v37_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests clocks cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_step_clocks_v37_gpu.py"} ;;
    clocks) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/diag_step_clocks_v37.py "$OUT" \
      --rounds "${ROUNDS:-4}" 2>&1 | tail -12 ;;
    quick) timeout "${QUICK_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    rest) run_gpu_tests "$OUT/rest.log" $(for f in ${REST:-}; do echo "$REPO/tests/$f"; done) ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
