#!/bin/bash
# v59's device visit: tools/device_v58.sh's stages (STAGES: tests ab train quick san cache; FILES, ROUNDS, AB, ...)
# with v59's defaults; results under $OUT.
export OUT=${OUT:-/tmp/v59_out} FILES=${FILES:-$PWD/tests/test_persistent_v59_gpu.py} \
       AB=${AB:-bench_persistent_v59} AB_NAME=${AB_NAME:-ab_alternate_v59}
exec bash tools/device_v58.sh
