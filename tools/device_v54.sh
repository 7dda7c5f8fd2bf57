#!/bin/bash
# v54's device visit: v52's stages (tools/device_v52.sh: tests, ab, sanitize, train, clocks, diagin, host, quick,
# cache) with v54's defaults: $OUT /tmp/v54_out; tests: v54's GPU tests; ab: bench_persistent_v54 (the input warps).
export OUT=${OUT:-/tmp/v54_out} AB=${AB:-bench_persistent_v54} FILES=${FILES:-"$PWD/tests/test_persistent_v54_gpu.py"}
exec bash tools/device_v52.sh
