#!/bin/bash
# v36's device visit (long fp32 reductions in chunks).
# Stages (STAGES), all under $OUT:
#   tests     GPU test files ($TESTS; default the v36 file), TEST_TIMEOUT (default 300)
#   chunked   chunked vs strict vs one GEMM: errors against float64 and times, alternated (bench_chunked_v36.py)
#   margin    the long-reduction thresholds halved vs v35's, between the two (bench_margin_v36.py)
#   quick     the quick bench (#5's table, cuDNN in the process)
#   rest      more GPU test files ($REST), TEST_TIMEOUT
#   cache     the NVRTC cache
set -u
OUT=${OUT:-/tmp/v36_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v36_gpu.py"} ;;
    chunked) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_chunked_v36.py "$OUT" \
      --rounds "${ROUNDS:-3}" 2>&1 | tail -9 ;;
    margin) timeout "${BENCH_TIMEOUT:-200}" python3 benchmarks/bench_margin_v36.py "$OUT" \
      --rounds "${ROUNDS:-3}" 2>&1 | tail -7 ;;
    quick) timeout "${QUICK_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    rest) run_gpu_tests "$OUT/rest.log" $(for f in ${REST:-}; do echo "$REPO/tests/$f"; done) ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
