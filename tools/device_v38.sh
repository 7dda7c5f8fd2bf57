#!/bin/bash
# v38's device visit (calls 1-4: k-tile by k-tile staging, removed; from call 5: 8-warp 16-bit forwards at H=1728-2048).
# Stages (STAGES), all under $OUT:
#   tests     GPU test files ($TESTS; default the v38 file), TEST_TIMEOUT (default 300)
#   explore   benchmarks/explore_h2048_warps_v38.py (ROUNDS; CELLS: its --cells)
#   ab        whole forwards, the new picks vs v37's (bench_persistent_v38 through ab_alternate.py; ROUNDS)
#   quick     the quick bench (#5's table, cuDNN in the process)
#   rest      more GPU test files ($REST), TEST_TIMEOUT
#   cache     the NVRTC cache
set -u
OUT=${OUT:-/tmp/v38_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests quick cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v38_gpu.py"} ;;
    explore) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/explore_h2048_warps_v38.py "$OUT" \
      --rounds "${ROUNDS:-4}" ${CELLS:+--cells $CELLS} 2>&1 | tail -24 ;;
    ab) timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v38 \
      --rounds "${ROUNDS:-4}" --name ab_picks_v38 2>&1 | tail -10 ;;
    quick) timeout "${QUICK_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    rest) run_gpu_tests "$OUT/rest.log" $(for f in ${REST:-}; do echo "$REPO/tests/$f"; done) ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
