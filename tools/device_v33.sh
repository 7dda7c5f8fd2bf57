#!/bin/bash
# v33's device visit (the fp32 grid forward unscales the fp16-split GEMM's xw where it loads it).
# Stages (STAGES), all under $OUT:
#   tests     GPU test files ($TESTS; default the v33 file), TEST_TIMEOUT (default 300)
#   ab        v33 against the unscale pass, alternated in one process (ab_alternate.py, bench_persistent_v33)
#   profile   the fp32 whole forward's parts outside the kernel (profile_fp32_projection_v33.py)
#   kernels   every kernel and copy of the graph-replayed forwards, by CUPTI (profile_replay_kernels_v33.py)
#   explore   the grouped fp16 H=1024 B=16 forward tagged without the in-kernel projection, at first-poll delays
#             (explore_exchange_delay.py; v30 tried it at 0 ns only)
#   quick     the quick bench (#5's table, cuDNN in the process)
#   rest      more GPU test files ($REST), TEST_TIMEOUT
#   cache     the NVRTC cache
set -u
OUT=${OUT:-/tmp/v33_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v33_gpu.py"} ;;
    ab) timeout "${AB_TIMEOUT:-240}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v33 \
      --rounds "${ROUNDS:-3}" --name ab_alternate_v33 2>&1 | tail -10 ;;
    profile) timeout "${PROFILE_TIMEOUT:-120}" python3 benchmarks/profile_fp32_projection_v33.py "$OUT" 2>&1 | tail -6 ;;
    kernels) timeout "${PROFILE_TIMEOUT:-120}" python3 benchmarks/profile_replay_kernels_v33.py "$OUT" 2>&1 | tail -70 ;;
    explore) timeout "${EXPLORE_TIMEOUT:-200}" python3 benchmarks/explore_exchange_delay.py "$OUT" --cells '[["float16", 1024, 16]]' \
      --groups '[2]' --delays '[0, 200, 400, 700, 1000]' --only '["chosen", "g2 w8u16 tagged", "g2 w8u16 grid.sync"]' \
      --rounds "${ROUNDS:-3}" --name explore_groups_delays_v33 2>&1 | tail -9 ;;
    quick) timeout "${QUICK_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    rest) run_gpu_tests "$OUT/rest.log" $(for f in ${REST:-}; do echo "$REPO/tests/$f"; done) ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
