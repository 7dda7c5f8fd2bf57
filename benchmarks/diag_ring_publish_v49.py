"""v49 diagnostic: the replay ring's publish piece by piece (diag_host_path_v49 found 15-17 µs of the 20-30 µs before a
replayed forward's launch in InputRing.publish). Each piece is timed in a warm loop (µs per call) and once right after
a device sync (median of N), on fp32 H=1024 B=4's replayed graph and its caller's x, h0, c0.

    python benchmarks/diag_ring_publish_v49.py OUT_DIR [--calls N]
Writes OUT_DIR/diag_ring_publish_v49.md and .json.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import _problem, bench_args, bench_meta, save_rows  # noqa: E402


def pieces(ring, x, h0, c0) -> dict:
    from ecornn.arrays import data_address, is_gpu_array
    from ecornn.engines import persistent_replay_ring as rr
    buf = ring.buffers[0]
    inputs = (x, h0, c0)
    noop = lambda: None  # noqa: E731
    return {
        "data_address(x)": lambda: data_address(x),
        "x.data.ptr": lambda: x.data.ptr,
        "hasattr(x, '__array_interface__')": lambda: hasattr(x, "__array_interface__"),
        "x.flags.c_contiguous": lambda: x.flags.c_contiguous,
        "x.dtype == buf.dtype": lambda: x.dtype == buf.dtype,
        "x.nbytes": lambda: x.nbytes,
        "is_gpu_array(x)": lambda: is_gpu_array(x),
        "int(ring.done[0])": lambda: int(ring.done[0]),
        "ring._check_mismatch()": ring._check_mismatch,
        "ring._claim_slot(noop)": lambda: ring._claim_slot(noop),
        "_as_buffer_like(x, buf, aligned=True)": lambda: rr._as_buffer_like(x, buf, aligned=True),
        "ring._write(ring.last_sources)": lambda: ring._write(ring.last_sources),
        "ring.publish(inputs, noop)": lambda: ring.publish(inputs, noop),
    }


def timed(fn, calls, sync) -> tuple:
    import cupy as cp
    warm = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    warm = (time.perf_counter_ns() - warm) / calls / 1e3
    cold = []
    for _ in range(calls // 4):
        sync()
        t = time.perf_counter_ns()
        fn()
        cold.append((time.perf_counter_ns() - t) / 1e3)
    cp.cuda.Device().synchronize()
    return warm, float(np.median(cold))


def main(argv=None):
    import cupy as cp
    from ecornn.engines import persistent
    args, out = bench_args(argv, configure=lambda p: p.add_argument("--calls", type=int, default=2000))
    meta = bench_meta()
    config, weights, x, h0, c0 = _problem("float32", 1024, 4)
    prepared = persistent.prepare(config, weights)
    for _ in range(3):
        persistent.forward(config, x, weights, h0, c0, prepared=prepared)
    cp.cuda.Device().synchronize()
    ring = next(iter(prepared.graphs.values())).ring
    rows = []
    for name, fn in pieces(ring, x, h0, c0).items():
        warm, cold = timed(fn, args.calls, cp.cuda.Device().synchronize)
        rows.append({"piece": name, "warm_us": warm, "after_sync_us": cold})
    lines = ["| piece | warm loop µs | after a device sync µs (median) |", "|---|---|---|"]
    lines += [f"| `{r['piece']}` | {r['warm_us']:.2f} | {r['after_sync_us']:.2f} |" for r in rows]
    text = "\n".join(lines)
    print(text)
    save_rows(out, "diag_ring_publish_v49", meta, rows, text)


if __name__ == "__main__":
    main()
