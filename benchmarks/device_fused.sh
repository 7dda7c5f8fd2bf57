#!/usr/bin/env bash
# One device visit for the `fused` strategy: install, GPU + CPU tests, benchmark; logs under $OUT.
#   bash benchmarks/device_fused.sh quick   # first visit: all tests + a small benchmark
#   bash benchmarks/device_fused.sh full    # the full grid, layers and ablation tables
#   bash benchmarks/device_fused.sh bench   # full benchmark only (tests skipped)
#   bash benchmarks/device_fused.sh strict  # fp32 grid, TF32 off in fused and cuDNN
set -o pipefail
MODE=${1:-quick}
OUT=${OUT:-/tmp/fused_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1 || tail -5 "$OUT/pip.log"
if ! python3 -c "import ecornn.layouts, ecornn.kernels" 2>/dev/null; then
  # editable install unavailable: map the two package dirs the way setup.py does (device copy only)
  ln -sfn ../layouts ecornn/layouts; ln -sfn ../kernels ecornn/kernels
  echo "ecornn.layouts/kernels linked in place" >> "$OUT/pip.log"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
python3 -c "import cupy, torch, numpy; print('cupy', cupy.__version__, 'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'numpy', numpy.__version__)" >> "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
if [ "$MODE" != "bench" ] && [ "$MODE" != "strict" ]; then
  timeout 150 python3 -m pytest -q -rfs -W ignore -p no:cacheprovider --timeout=100 \
      tests/test_fused_gpu.py tests/test_fused_cpu.py 2>&1 | tee "$OUT/tests.log" | tail -40
  if [ "${PIPESTATUS[0]}" != 0 ] && [ "$MODE" = "full" ]; then
    grep -E "^(FAILED|ERROR)|Error:" "$OUT/tests.log" | head -30
    echo "tests failed: benchmark skipped (numbers of a wrong engine mean nothing)"; exit 1
  fi
fi
if [ "$MODE" = "strict" ]; then
  timeout 200 python3 benchmarks/bench_fused.py --strict-only --out "$OUT" --tag fused_strict --reps 3 --warmup 1 \
      2>&1 | tee "$OUT/bench.log" | tail -40
elif [ "$MODE" = "quick" ]; then
  timeout 270 python3 benchmarks/bench_fused.py --quick --out "$OUT" --tag fused_quick --reps 3 2>&1 | tee "$OUT/bench.log" | tail -60
else
  timeout ${BENCH_TIMEOUT:-300} python3 benchmarks/bench_fused.py --out "$OUT" --tag fused_full --reps 3 --warmup 1 \
      2>&1 | tee "$OUT/bench.log" | tail -100
fi
