#!/bin/bash
# One device visit for fused v3 (one tensor-core kernel per step, fp16/bf16): GPU tests of the mma
# step and of the whole fused strategy, then the epilogue on/off/cuDNN benchmark. Logs under
# $OUT/fused_mma/ (tests.log, bench.log, fused_mma.{json,md}); each section under its own timeout.
#   bash benchmarks/device_fused_mma.sh          # tests, then the benchmark (mma step in every cell)
#   SKIP_TESTS=1 bash benchmarks/device_fused_mma.sh
# MMA_MAX_GFLOP: the size rule's threshold for the benchmark (default 1e9 = mma step everywhere,
# so the table shows where it wins; pass e.g. 0.6 to measure the shipped rule).
set -u
OUT=${OUT:-/tmp/fused_mma_out}
LOG="$OUT/fused_mma"
mkdir -p "$LOG"
source benchmarks/device_setup.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"
} > "$LOG/device.txt" 2>&1
cat "$LOG/device.txt"

if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout ${TEST_TIMEOUT:-110} python3 -m pytest -q -m gpu -rfEs -p no:cacheprovider --durations=8 \
      tests/test_fused_mma_gpu.py tests/test_fused_gpu.py > "$LOG/tests.log" 2>&1
  echo "tests exit: $?" >> "$LOG/tests.log"
  tail -30 "$LOG/tests.log"
fi

timeout ${BENCH_TIMEOUT:-140} python3 benchmarks/bench_fused.py --mma --out "$LOG" --tag fused_mma \
    --reps ${REPS:-3} --warmup 1 --mma-max-gflop ${MMA_MAX_GFLOP:-1e9} \
    --hidden ${HIDDEN:-256,512,1024,2048} --batch ${BATCH:-16,64,128,256} --dtypes ${DTYPES:-float16,bfloat16} \
    > "$LOG/bench.log" 2>&1
echo "bench exit: $?" >> "$LOG/bench.log"
tail -45 "$LOG/bench.log"
