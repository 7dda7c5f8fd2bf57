#!/bin/bash
# v61's device visit: device_v60.sh with v61's test files and its A/B module (the remembered graph key against v60's
# key per call); STAGES as there, default "tests ab lean quick".
export FILES=${FILES:-"$PWD/tests/test_persistent_v61_gpu.py $PWD/tests/test_persistent_v60_gpu.py $PWD/tests/test_persistent_v20_gpu.py $PWD/tests/test_persistent_v17_gpu.py"}
export AB_MODULE=${AB_MODULE:-bench_persistent_v61} STAGES=${STAGES:-"tests ab lean quick"}
exec bash tools/device_v60.sh
