#!/bin/bash
# v53's device visit: v52's stages (tools/device_v52.sh: tests, ab, sanitize, train, clocks, diagin, host, quick,
# cache) with v53's defaults: $OUT /tmp/v53_out; tests: test_persistent_gpu.py; ab: bench_persistent_v53c (the fp32
# first-poll waits; v53b the clustered spin's sweep; the bulk-copy bench of call 1 needs commit 6b8ac73).
export OUT=${OUT:-/tmp/v53_out} AB=${AB:-bench_persistent_v53c} FILES=${FILES:-"$PWD/tests/test_persistent_gpu.py"}
exec bash tools/device_v52.sh
