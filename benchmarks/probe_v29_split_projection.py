"""TEMPORARY v29 exploration (kernel alone, fp32 H=1024 B=4, T=256): the split's forced in-kernel projection
with parts of it compiled out (V29_PROBE bits: 1 x staging, 2 the input mma, 4 the combine, 8 the
pointwise's x_hi W_lo^T loads, 16 the whole input product), against v28's plan ("auto"). Numbers are
wrong with any bit set; only the time counts.

    python benchmarks/probe_v29_split_projection.py PROBE proj|auto [build]
"""
import sys, json
sys.path.insert(0, "benchmarks")
import numpy as np, cupy as cp
from bench_persistent import _problem, kernel_launcher, _median_ms
from ecornn.engines import persistent
probe, mode = int(sys.argv[1]), sys.argv[2]
real = persistent._flag_defines
persistent._flag_defines = lambda: {**real(), "V29_PROBE": probe}
persistent.IN_KERNEL_PROJECTION = True if mode == "proj" else "auto"
config, weights, x, h0, c0 = _problem("float32", 1024, 4, seed=1028)
prepared = persistent.prepare(config, weights)
plan = persistent.plans_for(config, False)["forward"]
if "build" in sys.argv:
    persistent._final(plan)
    sys.exit(0)
launch = kernel_launcher(config, prepared, x, h0, c0, plan)
for _ in range(3): launch()
ts = []
for r in range(5):
    ev = [cp.cuda.Event() for _ in range(2)]
    ev[0].record(); 
    for _ in range(10): launch()
    ev[1].record(); ev[1].synchronize()
    ts.append(cp.cuda.get_elapsed_time(ev[0], ev[1]) / 10 * 1000 / 256)
print(json.dumps({"probe": probe, "mode": mode, "delay": plan.poll_delay_ns, "proj": persistent._final(plan).in_kernel_projection, "us_per_step": sorted(ts)[2], "all": [round(t,3) for t in ts]}), flush=True)
