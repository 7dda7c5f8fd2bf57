#!/bin/bash
# v28's device visit (fp32 forwards). Stages (STAGES), everything under $OUT:
#   explore     the kernel alone (explore_exchange_delay.py): split words vs v13's rows at first-poll delays
#   gates       FAST_FP32_GATES on vs off on the chosen fp32 plans ($GATE_CELLS)
#   delays      with the fast gates: the split's delays, words and rows (H200 rule data)
#   h100        the B=4 split's delays around 400 ns; profile_whole_call.py
#   projection  the fp16-split GEMM against float64, then FP32_GEMMS fp16split vs onepass (ab_alternate)
#   tests       GPU test files ($TESTS)
#   alternate   whole forward v28 vs v27 (ab_alternate.py bench_persistent_v28)
#   bench       the quick bench; pair: fwd+bwd with cuDNN (bench_persistent_v28.py); cache: the NVRTC cache
set -u
OUT=${OUT:-/tmp/v28_out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
record_device "$OUT/device.txt"
for stage in ${STAGES:-"explore tests cache"}; do
  case $stage in
    explore)
      timeout "${EXPLORE_TIMEOUT:-240}" python3 benchmarks/explore_exchange_delay.py "$OUT" --rounds "${ROUNDS:-3}" \
        --cells '[["float32", 1024, 4]]' --only '["chosen", "w8u8"]' --delays '[0, 300, 600, 900, 1200]' \
        --rows-delays '[1200]' --name explore_split_words_b4 2>&1 | tail -9
      [ -n "${CELLS:-}" ] && timeout "${EXPLORE_TIMEOUT:-240}" python3 benchmarks/explore_exchange_delay.py "$OUT" \
        --rounds "${ROUNDS:-3}" --cells "$CELLS" --delays "${DELAYS:-[0, 400, 800, 1200]}" --name explore_split_words 2>&1 | tail -20 ;;
    gates)   # v28's gate functions against expf / tanhf (FAST_FP32_GATES off) on the chosen fp32 plans
      timeout "${EXPLORE_TIMEOUT:-240}" python3 benchmarks/explore_exchange_delay.py "$OUT" --rounds "${ROUNDS:-3}" \
        --cells "${GATE_CELLS:-[[\"float32\", 1024, 4], [\"float32\", 1024, 8], [\"float32\", 512, 4], [\"float32\", 512, 8], [\"float32\", 1536, 4], [\"float32\", 1024, 1], [\"float32\", 512, 1], [\"float32\", 256, 8], [\"float32\", 1024, 16]]}" \
        --only '["chosen"]' --delays '[]' --libm-gates --name explore_gates 2>&1 | tail -20 ;;
    delays)   # with v28's gates: the split's first-poll delays, words and (B=4) v13's rows
      timeout "${EXPLORE_TIMEOUT:-240}" python3 benchmarks/explore_exchange_delay.py "$OUT" --rounds "${ROUNDS:-3}" \
        --cells '[["float32", 1024, 4]]' --only '["w8u8"]' --delays '[0, 100, 200, 300, 400, 500]' \
        --rows-delays '[0, 300]' --name explore_delays_b4 2>&1 | tail -10
      timeout "${EXPLORE_TIMEOUT:-240}" python3 benchmarks/explore_exchange_delay.py "$OUT" --rounds "${ROUNDS:-3}" \
        --cells '[["float32", 1024, 8], ["float32", 1536, 4], ["float32", 512, 8], ["float32", 1024, 16]]' \
        --delays '[0, 200, 400]' --name explore_delays 2>&1 | tail -20 ;;
    h100)   # the B=4 split's first-poll delay around 300 ns on the H100; where the whole call's time goes
      timeout "${EXPLORE_TIMEOUT:-240}" python3 benchmarks/explore_exchange_delay.py "$OUT" --rounds "${ROUNDS:-3}" \
        --cells '[["float32", 1024, 4], ["float32", 1536, 4]]' --only '["w8u"]' --delays '[150, 200, 250, 300, 350, 400, 500]' \
        --name explore_delays_h100 2>&1 | tail -16
      timeout 200 python3 benchmarks/profile_whole_call.py "$OUT" 2>&1 | tail -12 ;;
    projection)   # the fp16-split projection against v25's one-pass 3xTF32: accuracy on the device, then A/B
      python3 -c "
import cupy as cp, numpy as np
from ecornn import gpu_blas as g
rng = np.random.default_rng(1)
for m, k, n, spread in ((1024, 1024, 4096, 0), (256, 300, 1000, 20)):
    a = rng.standard_normal((m, k)).astype(np.float32) * np.float32(10.0) ** rng.integers(-spread, spread + 1, (m, 1)).astype(np.float32)
    w = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
    out = cp.empty((m, n), cp.float32)
    g.matmul_fp16_split3(*g.fp16_split3(cp.asarray(a), False), *g.fp16_split3(cp.asarray(w), True), out)
    ref = a.astype(np.float64) @ w.astype(np.float64).T
    rows = np.linalg.norm(out.get() - ref, axis=1) / np.linalg.norm(ref, axis=1)
    print('fp16split gemm', m, k, n, 'spread 1e', spread, 'worst row rel err', rows.max())
" 2>&1 | tail -3
      timeout "${ALT_TIMEOUT:-200}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v28_projection \
        --rounds "${ROUNDS:-3}" --name ab_projection_v28 2>&1 | tail -9 ;;
    tests)
      run_gpu_tests "$OUT/tests.log" ${TESTS:-"$REPO/tests/test_persistent_v13_gpu.py" "$REPO/tests/test_persistent_v14_gpu.py" \
        "$REPO/tests/test_persistent_v26_gpu.py"} ;;
    alternate) timeout "${ALT_TIMEOUT:-200}" python3 benchmarks/ab_alternate.py "$OUT" bench_persistent_v28 \
      --rounds "${ROUNDS:-3}" --name ab_alternate_v28 2>&1 | tail -12 ;;
    pair) timeout "${PAIR_TIMEOUT:-200}" python3 benchmarks/bench_persistent_v28.py "$OUT" 2>&1 | tail -8 ;;
    bench) timeout "${BENCH_TIMEOUT:-150}" python3 benchmarks/bench_persistent.py --out "$OUT" --quick 2>&1 | tail -14 ;;
    cache) save_cupy_cache "$OUT" ;;
  esac
done
