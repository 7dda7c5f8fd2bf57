#!/bin/bash
# Device visits for the H100 planner refit and the #5 plots: PARTS from
#   suite      the whole GPU test suite (full log)
#   tests      the GPU test files named in $TESTS (tests.log)
#   inference  sweep fp32 + bf16 inference, every strategy and cuDNN (plots, inference constants)
#   training   sweep fp32 + bf16 training, every strategy (training constants)
# each under its own timeout; results in $OUT (at most 8 files come back), CuPy's kernel cache saved
# for the next visit (carry .devcache).
set -u
OUT=${OUT:-/tmp/refit_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
HIDDEN=${HIDDEN:-256,512,1024,1536,2048}
BATCH=${BATCH:-1,2,4,8,16,32,64,128}
sweep() {  # mode limit extra-args...
  local mode=$1 limit=$2; shift 2
  timeout "$limit" python3 -m ecornn.run sweep --hidden "$HIDDEN" --batch "$BATCH" --dtype float32,bfloat16 \
    --mode "$mode" --seq-len 256 --iterations 2 --json "$OUT/sweep_$mode.json" "$@" > "$OUT/sweep_$mode.log" 2>&1
  echo "sweep $mode exit: $? (124: timeout)" | tee -a "$OUT/sweep_$mode.log"
  tail -5 "$OUT/sweep_$mode.log"
}
for part in ${PARTS:-suite}; do
  case $part in
    suite)
      (cd /tmp && timeout ${SUITE_TIMEOUT:-300} python3 -m pytest -q -m gpu -rfEs --durations=10 --import-mode=append \
        -p no:cacheprovider --rootdir "$REPO" "$REPO/tests" > "$OUT/gpu_suite.log" 2>&1
       echo "pytest exit: $? (124: timeout)" >> "$OUT/gpu_suite.log")
      tail -25 "$OUT/gpu_suite.log" ;;
    tests) run_gpu_tests "$OUT/tests.log" $TESTS ;;
    inference) sweep inference ${INFERENCE_TIMEOUT:-300} ;;
    training) sweep training ${TRAINING_TIMEOUT:-300} --no-torch ;;
  esac
done
save_cupy_cache "$OUT"
