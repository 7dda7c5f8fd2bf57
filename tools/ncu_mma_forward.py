"""Launch one `persistent` forward kernel alone (T=256, 1 layer, input=hidden, random inputs) a few
times, for Nsight Compute to profile the last launch:

    ncu --set full -k regex:persistent_lstm_fwd -s 2 -c 1 -o REPORT python3 tools/ncu_mma_forward.py DTYPE H B
"""
import sys
from pathlib import Path

import cupy as cp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_persistent import _problem, kernel_launcher  # noqa: E402

from ecornn.engines import persistent  # noqa: E402

dtype, hidden, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=1)
prepared = persistent.prepare(config, weights)
plan = persistent.plans_for(config, False)["forward"]
print(plan.describe(), persistent.kernel_report(plan), flush=True)
launch = kernel_launcher(config, prepared, x, h0, c0, plan)
for _ in range(3):
    launch()
cp.cuda.runtime.deviceSynchronize()
