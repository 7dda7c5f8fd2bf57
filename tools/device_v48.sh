#!/bin/bash
# v48's device visit: the fp16 split of x by one warp per row (gpu_blas.SPLIT_BY_WARPS); a padded forward's
# copies (batch_pad, persistent.PAD_READS_X, CUT_AT_COPY_OUT).
# Stages (STAGES), all under $OUT:
#   tests     GPU tests of v48 (REST: more test files, e.g. "$REPO/tests/test_persistent_v9_gpu.py")
#   profile   benchmarks/profile_replay_kernels_v48.py (every kernel of a replayed forward, both splits)
#   ab        benchmarks/ab_alternate.py over bench_persistent_v48 (whole forward, both splits alternated)
#   pprofile  the same profile, set "padding" (padded forwards under v48's copies and v47's)
#   pab       benchmarks/ab_alternate.py over bench_padding_copies_v48 (padded whole forwards, both copies alternated)
#   cache     the CuPy kernel cache into $OUT (15 MB parts) for the next visit to carry as .devcache/
#   v47:*     a stage of tools/device_v47.sh (pad, tests, pbench, sanitize, v46:* (..., quick via v42:*))
set -u
OUT=${OUT:-/tmp/v48_out}
mkdir -p "$OUT"
for stage in ${STAGES:-tests}; do
  case $stage in
    tests) source benchmarks/device_setup.sh && record_device "$OUT/device.txt"
           run_gpu_tests "$OUT/tests.log" "$REPO/tests/test_persistent_v48_gpu.py" ${REST:-} ;;
    profile) source benchmarks/device_setup.sh
             timeout "${BENCH_TIMEOUT:-200}" python3 benchmarks/profile_replay_kernels_v48.py "$OUT" 2>&1 | tail -12 ;;
    ab) source benchmarks/device_setup.sh
        timeout "${BENCH_TIMEOUT:-240}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v48 \
          --rounds "${ROUNDS:-4}" --name ab_alternate_v48 2>&1 | tail -12 ;;
    pprofile) source benchmarks/device_setup.sh
              timeout "${BENCH_TIMEOUT:-200}" python3 benchmarks/profile_replay_kernels_v48.py "$OUT" --set padding 2>&1 \
                | tail -12 ;;
    pab) source benchmarks/device_setup.sh
         timeout "${BENCH_TIMEOUT:-240}" python3 benchmarks/ab_alternate.py "$OUT" bench_padding_copies_v48 \
           --rounds "${ROUNDS:-4}" --name ab_padding_copies_v48 2>&1 | tail -12 ;;
    cache) source benchmarks/device_setup.sh && save_cupy_cache "$OUT" ;;
    v47:*) OUT=$OUT STAGES=${stage#v47:} bash tools/device_v47.sh ;;
  esac
done
