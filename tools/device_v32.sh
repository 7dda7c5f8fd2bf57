#!/bin/bash
# v32's device visit (the fp32 split forward unscales the fp16-split GEMM's xw where it loads it).
# Stages (STAGES), all under $OUT:
#   tests     GPU test files ($TESTS; default the v32 file), TEST_TIMEOUT (default 300)
#   ab        v32 against v31's unscale pass, alternated in one process (ab_alternate.py, bench_persistent_v32)
#   pair      the same pair with fwd+bwd and cuDNN (bench_persistent_v32.py)
#   explore   fp32 training calls with the backwards' late loads against without, alternated (explore_bwd_v32.py)
#   quick     the quick bench (#5's table, cuDNN in the process)
#   rest      the GPU test files not run on this code yet ($REST), TEST_TIMEOUT
#   cache     the NVRTC cache
set -u
OUT=${OUT:-/tmp/v32_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v32_gpu.py"} ;;
    ab) timeout "${AB_TIMEOUT:-240}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v32 \
      --rounds "${ROUNDS:-3}" --name ab_alternate_v32 2>&1 | tail -8 ;;
    pair) timeout "${PAIR_TIMEOUT:-150}" python3 benchmarks/bench_persistent_v32.py "$OUT" 2>&1 | tail -6 ;;
    explore) timeout "${EXPLORE_TIMEOUT:-200}" python3 benchmarks/explore_bwd_v32.py "$OUT" ${EXPLORE_ARGS:-} --rounds "${ROUNDS:-3}" 2>&1 | tail -8 ;;
    quick) timeout "${QUICK_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    rest) run_gpu_tests "$OUT/rest.log" $(for f in ${REST:-}; do echo "$REPO/tests/$f"; done) ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
