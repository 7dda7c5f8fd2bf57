#!/bin/bash
# v31's device visit (the 16-bit backward: late loads, a 16-bit dy, 16-bit gradients out of the GEMMs).
# Stages (STAGES), all under $OUT:
#   tests     GPU test files ($TESTS; default the v31 file)
#   bench     training calls against cuDNN, alternated in one process (bench_persistent_v31.py)
#   bench_v30 the same bench on v30's engine (.devcache/v30_tree, carried: git archive of bdf2a7e)
#   profile   the training call's kernels (profile_training_v31.py), v31 then v30 (.devcache/v30_tree)
#   explore   training calls under v31's plans, without the late loads, and with v30's backward I/O
#   quick     the quick bench (#5's table); cache: the NVRTC cache
#   rest      the GPU test files call 9's suite did not reach on the final code (TEST_TIMEOUT, default 540)
set -u
OUT=${OUT:-/tmp/v31_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"tests cache"}; do
  case $stage in
    tests) run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v31_gpu.py"} ;;
    bench) timeout "${BENCH_TIMEOUT:-240}" python3 benchmarks/bench_persistent_v31.py "$OUT" \
      --rounds "${ROUNDS:-3}" 2>&1 | tail -10 ;;
    bench_v30) PYTHONPATH="$REPO/.devcache/v30_tree" timeout "${BENCH_TIMEOUT:-240}" \
      python3 benchmarks/bench_persistent_v31.py "$OUT" --rounds "${ROUNDS:-3}" --name persistent_v30_bench 2>&1 | tail -10 ;;
    profile) timeout "${PROFILE_TIMEOUT:-150}" python3 benchmarks/profile_training_v31.py "$OUT" 2>&1 | grep "^### \|^persistent:\|^cudnn:"
      PYTHONPATH="$REPO/.devcache/v30_tree" timeout "${PROFILE_TIMEOUT:-150}" python3 benchmarks/profile_training_v31.py \
        "$OUT" --name profile_training_v30 2>&1 | grep "^### \|^persistent:\|^cudnn:" ;;
    explore) timeout "${EXPLORE_TIMEOUT:-300}" python3 benchmarks/explore_bwd_v31.py "$OUT" --rounds "${ROUNDS:-3}" 2>&1 | tail -6 ;;
    quick) timeout "${QUICK_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    rest) TEST_TIMEOUT=${TEST_TIMEOUT:-540} run_gpu_tests "$OUT/rest.log" \
      $(for v in 5 6 7 15 16 17 25 26 27 28 29; do echo "$REPO/tests/test_persistent_v${v}_gpu.py"; done) \
      "$REPO/tests/test_torch_gpu.py" "$REPO/tests/test_gluon.py" ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
