#!/bin/bash
# One device visit for the persistent strategy: install, GPU tests, compute-sanitizer memcheck and
# racecheck on a small config, then the benchmark. Everything lands under $OUT (<= 8 files).
set -u
OUT=${OUT:-/tmp/persistent_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
  (cd /tmp && python3 -c "import ecornn.layouts, ecornn.engines.persistent; print('ecornn from', ecornn.__file__)")
  python3 -c "import cupy, torch; print('cupy', cupy.__version__, 'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"
  python3 -c "import cupy, numpy as np, ml_dtypes; a = cupy.asarray(np.ones(4, ml_dtypes.bfloat16)); print('cupy bf16 array:', a.dtype, float(a.astype(cupy.float32).sum()))" 2>&1 | tail -1
} > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"

(cd /tmp && timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q -rfE --durations=8 --import-mode=append \
  -p no:cacheprovider --rootdir "$REPO" "$REPO/tests/test_persistent_gpu.py" "$REPO/tests/test_persistent_capacity.py" \
  "$REPO/tests/test_layouts_persistent.py" "$REPO/tests/test_persistent_emulated.py" 2>&1 | tail -60) > "$OUT/tests.log"
tail -25 "$OUT/tests.log"

run_sanitizers benchmarks/persistent_small_run.py "$OUT/sanitizer.log" 70

timeout ${BENCH_TIMEOUT:-200} python3 benchmarks/bench_persistent.py --out "$OUT" ${BENCH_ARGS:-} 2>&1 | tail -45 > "$OUT/bench.log"
cat "$OUT/bench.log"
