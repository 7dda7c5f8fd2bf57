#!/bin/bash
# v35's device visit (the passes around the fp32 forward's kernel: x split by reference, the unscale by fours).
# Stages (STAGES), all under $OUT:
#   tests     GPU test files ($TESTS; default the v35 file), TEST_TIMEOUT (default 300)
#   micro     the unscale pass alone, flat vs by fours (time_unscale_v35.py)
#   ab        v35, each change alone and v34, alternated in one process (ab_alternate.py, bench_persistent_v35)
#   unscale   v33's split rule re-checked with the four-column pass (bench_persistent_v35_unscale)
#   placement the forward kernels alone with their exchange buffer and xw at chosen offsets (diag_placement_v35.py)
#   spin      the split's first-poll delay, __nanosleep vs a clock64() spin (bench_persistent_v35_spin)
#   dx        the fp32 backward's dx against float64 under each FP32_BACKWARD_GEMMS mode (diag_backward_dx_v35.py)
#   dxbench   dX strict from K=4096 vs one pass: dx error and fwd+bwd ms (bench_dx_v35.py)
#   fproj     the fp32 forward against float64 as the input size grows (diag_forward_projection_v35.py)
#   kernels   every kernel and copy of the graph-replayed fp32 forwards, v35 and v34, by CUPTI (profile_replay_kernels_v35.py)
#   quick     the quick bench (#5's table, cuDNN in the process)
#   sanitize  compute-sanitizer memcheck and racecheck over the tensor-core small run
#   memcheck  compute-sanitizer memcheck over the v35 GPU tests of the unscale pass and of a replayed split
#   rest      more GPU test files ($REST), TEST_TIMEOUT
#   cache     the NVRTC cache
set -u
OUT=${OUT:-/tmp/v35_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v35_gpu.py"} ;;
    micro) timeout "${MICRO_TIMEOUT:-90}" python3 benchmarks/time_unscale_v35.py "$OUT" 2>&1 | tail -8 ;;
    ab) timeout "${AB_TIMEOUT:-240}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v35 \
      --rounds "${ROUNDS:-3}" --name ab_alternate_v35 ${AB_ROWS:+--rows $AB_ROWS} 2>&1 | tail -8 ;;
    unscale) timeout "${AB_TIMEOUT:-240}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v35_unscale \
      --rounds "${ROUNDS:-5}" --name ab_unscale_v35 ${AB_ROWS:+--rows $AB_ROWS} 2>&1 | tail -8 ;;
    placement) timeout "${PLACEMENT_TIMEOUT:-200}" python3 benchmarks/diag_placement_v35.py "$OUT" \
      --rounds "${ROUNDS:-6}" 2>&1 | tail -50 ;;
    spin) timeout "${AB_TIMEOUT:-240}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v35_spin \
      --rounds "${ROUNDS:-8}" --name ab_spin_v35 ${AB_ROWS:+--rows $AB_ROWS} 2>&1 | tail -6 ;;
    dx) timeout "${DX_TIMEOUT:-200}" python3 benchmarks/diag_backward_dx_v35.py "$OUT" ${DX_ARGS:-} 2>&1 | tail -32 ;;
    dxbench) timeout "${DX_TIMEOUT:-300}" python3 benchmarks/bench_dx_v35.py "$OUT" --rounds "${ROUNDS:-4}" 2>&1 | tail -7 ;;
    fproj) timeout "${DX_TIMEOUT:-200}" python3 benchmarks/diag_forward_projection_v35.py "$OUT" 2>&1 | tail -7 ;;
    kernels) timeout "${PROFILE_TIMEOUT:-150}" python3 benchmarks/profile_replay_kernels_v35.py "$OUT" 2>&1 | grep "device time per call" ;;
    quick) timeout "${QUICK_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    sanitize) run_sanitizers benchmarks/persistent_mma_small_run.py "$OUT/sanitizers.log" "${SAN_TIMEOUT:-200}" 10 ;;
    memcheck) (cd /tmp && timeout "${SAN_TIMEOUT:-240}" compute-sanitizer --tool memcheck --error-exitcode 9 \
      python3 -m pytest -q -m gpu -p no:cacheprovider --import-mode=append --rootdir "$REPO" \
      "$REPO/tests/test_persistent_v35_gpu.py" -k "unscale or four_column or nan" 2>&1; echo "exit: $?") \
      | grep -v "^$" | tail -6 | tee "$OUT/memcheck_v35.log" ;;
    rest) run_gpu_tests "$OUT/rest.log" $(for f in ${REST:-}; do echo "$REPO/tests/$f"; done) ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
