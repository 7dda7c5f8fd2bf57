#!/bin/bash
# One device visit for fused v3 (one tensor-core kernel per step, fp16/bf16): GPU tests of the mma
# step and of the whole fused strategy, then the epilogue on/off/cuDNN benchmark. Logs under
# $OUT/fused_mma/ (tests.log, bench.log, fused_mma.{json,md}); each section under its own timeout.
#   bash benchmarks/device_fused_mma.sh          # tests, then the benchmark (mma step in every cell)
#   SKIP_TESTS=1 bash benchmarks/device_fused_mma.sh
#   PROFILE=1 SKIP_BENCH=1 bash benchmarks/device_fused_mma.sh   # tests, tile timings + Nsight Compute
# PROFILE=1 adds (before the benchmark) benchmarks/profile_fused_step.py: graph-ON µs/step of the
# chosen forward tile, alternative tiles and epilogue off (profile.txt / profile.json;
# PROFILE_CONFIGS=256x128,256x16,1024x16), then `ncu` on the graph-OFF forward, one run per config
# of NCU_CONFIGS (fused_step_fwd launches 6-8 of a T=32 forward), report text in ncu.txt;
# an entry HxB@m,n,w,mw forces that forward tile (e.g. 256x128@4,2,4,1: v3's tile, to compare).
# SKIP_BENCH=1 skips the on/off/cuDNN table (HIDDEN, BATCH, DTYPES restrict it instead).
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

if [ "${PROFILE:-0}" = 1 ]; then
  timeout ${PROFILE_TIMEOUT:-75} python3 benchmarks/profile_fused_step.py \
      --configs ${PROFILE_CONFIGS:-256x128,256x16,1024x16} --json "$LOG/profile.json" > "$LOG/profile.txt" 2>&1
  echo "profile exit: $?" >> "$LOG/profile.txt"
  cat "$LOG/profile.txt"
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  : > "$LOG/ncu.txt"
  if [ -z "$NCU" ]; then
    echo "ncu not found" | tee "$LOG/ncu.txt"
  else
    for entry in ${NCU_CONFIGS:-256x128 256x16 1024x16 256x128@4,2,4,1}; do
      cfg=${entry%@*}; tile=""
      [ "$cfg" != "$entry" ] && tile="--tile ${entry#*@}"
      echo "==== ncu fp16 H x B = $entry (graph off, T=32, launches 6-8 of fused_step_fwd)" >> "$LOG/ncu.txt"
      timeout ${NCU_TIMEOUT:-50} "$NCU" --kernel-name regex:fused_step_fwd --launch-skip 5 --launch-count 3 \
          --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
          --section MemoryWorkloadAnalysis \
          python3 benchmarks/profile_fused_step.py --mode ncu --config "$cfg" $tile >> "$LOG/ncu.txt" 2>&1
      echo "ncu exit ($entry): $?" >> "$LOG/ncu.txt"
    done
    grep -E "^==== |Duration|Registers Per|Achieved Occupancy|Block Size|Grid Size|ncu exit|ERR" "$LOG/ncu.txt" | head -60
  fi
fi

[ "${SKIP_BENCH:-0}" = 1 ] && exit 0
timeout ${BENCH_TIMEOUT:-140} python3 benchmarks/bench_fused.py --mma --out "$LOG" --tag fused_mma \
    --reps ${REPS:-3} --warmup 1 --mma-max-gflop ${MMA_MAX_GFLOP:-1e9} \
    --hidden ${HIDDEN:-256,512,1024,2048} --batch ${BATCH:-16,64,128,256} --dtypes ${DTYPES:-float16,bfloat16} \
    > "$LOG/bench.log" 2>&1
echo "bench exit: $?" >> "$LOG/bench.log"
tail -45 "$LOG/bench.log"
