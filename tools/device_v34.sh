#!/bin/bash
# v34's device visit (the fp32 split forward takes h0 into its step-0 product: no W_hh h0 GEMV).
# Stages (STAGES), all under $OUT:
#   tests     GPU test files ($TESTS; default the v34 file), TEST_TIMEOUT (default 300)
#   ab        v34 against the GEMV (H0_IN_PRODUCT=False), alternated in one process (ab_alternate.py, bench_persistent_v34)
#   unscale   v33's split rule re-checked on the v34 kernel: the unscale pass ("auto") against in-kernel (bench_persistent_v34_unscale)
#   builds    each A/B row's forward plan as planned and as built, both modes (diag_v34_builds.py)
#   kernels   every kernel and copy of the graph-replayed forwards, by CUPTI (profile_replay_kernels_v33.py)
#   explore   the fp32 split B=4 kernels alone at first-poll delays around v28's 400 ns (explore_exchange_delay.py)
#   quick     the quick bench (#5's table, cuDNN in the process)
#   sanitize  compute-sanitizer memcheck and racecheck over the tensor-core small run (its fp32 split: random h0, H=42)
#   racecheck racecheck alone over the same run, its whole report kept (which kernels the hazards are in)
#   rest      more GPU test files ($REST), TEST_TIMEOUT
#   cache     the NVRTC cache
set -u
OUT=${OUT:-/tmp/v34_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v34_gpu.py"} ;;
    ab) timeout "${AB_TIMEOUT:-240}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v34 \
      --rounds "${ROUNDS:-3}" --name ab_alternate_v34 ${AB_ROWS:+--rows $AB_ROWS} 2>&1 | tail -8 ;;
    unscale) timeout "${AB_TIMEOUT:-240}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v34_unscale \
      --rounds "${ROUNDS:-5}" --name ab_unscale_v34 ${AB_ROWS:+--rows $AB_ROWS} 2>&1 | tail -6 ;;
    builds) timeout 200 python3 benchmarks/diag_v34_builds.py "$OUT" 2>&1 | tail -12 ;;
    kernels) timeout "${PROFILE_TIMEOUT:-120}" python3 benchmarks/profile_replay_kernels_v33.py "$OUT" 2>&1 | tail -70 ;;
    explore) timeout "${EXPLORE_TIMEOUT:-200}" python3 benchmarks/explore_exchange_delay.py "$OUT" \
      --cells '[["float32", 1024, 4], ["float32", 1536, 4]]' --delays '[250, 325, 400, 475, 550]' \
      --only '["chosen", "w8u8 tagged", "w8u12 tagged"]' --rounds "${ROUNDS:-3}" --name explore_split_delays_v34 2>&1 | tail -16 ;;
    quick) timeout "${QUICK_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    sanitize) run_sanitizers benchmarks/persistent_mma_small_run.py "$OUT/sanitizers.log" "${SAN_TIMEOUT:-200}" 10 ;;
    racecheck) SAN_TOOLS=racecheck run_sanitizers benchmarks/persistent_mma_small_run.py "$OUT/racecheck.log" "${SAN_TIMEOUT:-200}" 400 \
      | grep -A4 "Race reported\|SUMMARY" | head -40 ;;
    rest) run_gpu_tests "$OUT/rest.log" $(for f in ${REST:-}; do echo "$REPO/tests/$f"; done) ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
