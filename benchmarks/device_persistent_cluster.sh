#!/bin/bash
# One device visit for the persistent v3 cluster kernel: install, GPU + CPU tests of the cluster
# path (and the v2 GPU tests unless SKIP_V2=1), the cluster-vs-grid-vs-cuDNN benchmark, then
# compute-sanitizer on a small cluster run. Everything lands under $OUT (<= 8 files).
set -u
OUT=${OUT:-/tmp/persistent_cluster_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > "$OUT/device.txt" 2>&1
cat "$OUT/device.txt"

V2=""; [ "${SKIP_V2:-0}" = 1 ] || V2="$REPO/tests/test_persistent_gpu.py"
(cd /tmp && timeout ${TEST_TIMEOUT:-120} python3 -m pytest -q -rfE --durations=6 --import-mode=append \
  -p no:cacheprovider --rootdir "$REPO" "$REPO/tests/test_persistent_cluster_gpu.py" \
  "$REPO/tests/test_persistent_cluster_capacity.py" "$REPO/tests/test_persistent_cluster_emulated.py" $V2 \
  2>&1 | tail -60) > "$OUT/cluster_tests.log"
tail -30 "$OUT/cluster_tests.log"


timeout ${BENCH_TIMEOUT:-90} python3 benchmarks/bench_persistent_cluster.py "$OUT" --repeats ${REPEATS:-10} \
  2>&1 | tail -30 > "$OUT/cluster_bench.log"
cat "$OUT/cluster_bench.log"

run_sanitizers benchmarks/persistent_cluster_small_run.py "$OUT/cluster_sanitizer.log" 40 6
