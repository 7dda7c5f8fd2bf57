#!/bin/bash
# One device visit for the persistent v4 tensor-core kernel (fp16/bf16): GPU tests (v4 and v2),
# compute-sanitizer memcheck + racecheck on a tiny mma config (fwd+bwd), then the mma-vs-grid-vs-cuDNN
# benchmark. Logs under $OUT/mma/; each section has its own timeout (total well under 400 s).
set -u
OUT=${OUT:-/tmp/persistent_mma_out}
LOG="$OUT/mma"
mkdir -p "$LOG"
source benchmarks/device_setup.sh
record_device "$LOG/device.txt"

(cd /tmp && timeout ${TEST_TIMEOUT:-150} python3 -m pytest -q -m gpu -rfEs --durations=8 --import-mode=append \
  -p no:cacheprovider --rootdir "$REPO" "$REPO/tests/test_persistent_mma_gpu.py" "$REPO/tests/test_persistent_gpu.py" \
  2>&1 | tail -80) > "$LOG/tests.log"
tail -30 "$LOG/tests.log"

run_sanitizers benchmarks/persistent_mma_small_run.py "$LOG/sanitizer.log"

timeout ${BENCH_TIMEOUT:-100} python3 benchmarks/bench_persistent_mma.py "$LOG" --repeats ${REPEATS:-10} ${BENCH_ARGS:-} \
  2>&1 | tail -40 > "$LOG/bench.log"
cat "$LOG/bench.log"
