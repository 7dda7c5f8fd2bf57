"""v48 diagnostic: a replayed inference forward's host time before its graph is launched. The benches time one
call between two events with the GPU idle before it, so everything the host does before cudaGraphLaunch is on
the measured span (fp32 H=1024 B=8: the replayed graph's kernels and copies take 2.60 µs/step of device time,
the span 2.73). Per cell: the time from the call to the launch (a proxy around the captured graph records
it), the launch call itself, the whole call's host time and the event span; then cProfile's functions by
their own time over 200 calls.

    python benchmarks/diag_prelaunch_v48.py OUT_DIR [--calls N]
Writes OUT_DIR/diag_prelaunch_v48.md and .json.
"""
from __future__ import annotations

import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _median_ms, _problem, bench_args, bench_meta  # noqa: E402

CELLS = [("float32", 1024, 8), ("float32", 1024, 4), ("bfloat16", 1024, 4), ("float16", 1024, 16)]


class LaunchClock:
    """Stands in for a captured cupy Graph: records perf_counter before and after each launch."""

    def __init__(self, graph):
        self.graph, self.before, self.after = graph, [], []

    def launch(self, stream=None):
        self.before.append(time.perf_counter())
        self.graph.launch(stream=stream)
        self.after.append(time.perf_counter())


def cell_row(dtype, hidden, batch, calls) -> dict:
    import cupy as cp
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch)
    prepared = persistent.prepare(config, weights)
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    span = _median_ms(fwd, 30) * 1e3 / STEPS
    entry = next(iter(prepared.graphs.values()))
    clock = LaunchClock(entry.graph)
    entry.graph = clock
    starts, ends = [], []
    try:
        for _ in range(calls):
            cp.cuda.Device().synchronize()
            starts.append(time.perf_counter())
            fwd()
            ends.append(time.perf_counter())
        cp.cuda.Device().synchronize()
        profiler = cProfile.Profile()
        for _ in range(200):
            cp.cuda.Device().synchronize()
            profiler.enable()
            fwd()
            profiler.disable()
        cp.cuda.Device().synchronize()
    finally:
        entry.graph = clock.graph
    before = np.array(clock.before[:calls]) - np.array(starts)
    launch = np.array(clock.after[:calls]) - np.array(clock.before[:calls])
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
    return {"dtype": dtype, "hidden": hidden, "batch": batch, "span_us_per_step": span,
            "prelaunch_us": float(np.median(before) * 1e6), "prelaunch_min_us": float(before.min() * 1e6),
            "launch_call_us": float(np.median(launch) * 1e6),
            "call_us": float(np.median(np.array(ends) - np.array(starts)) * 1e6),
            "profile": text.getvalue()[:7000]}


def markdown(rows) -> str:
    lines = ["| cell | event span µs/step | host before the launch µs (median, min) | the launch call µs | whole call µs |",
             "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {r['span_us_per_step']:.3f} | "
                     f"{r['prelaunch_us']:.1f} ({r['prelaunch_min_us']:.1f}) | {r['launch_call_us']:.1f} | "
                     f"{r['call_us']:.1f} |")
    for r in rows:
        lines += ["", f"### {r['dtype']} H={r['hidden']} B={r['batch']}: cProfile by own time, 200 calls", "",
                  "```", r["profile"], "```"]
    return "\n".join(lines)


def main(argv=None):
    args, out = bench_args(argv, configure=lambda p: p.add_argument("--calls", type=int, default=200))
    rows = [cell_row(*cell, args.calls) for cell in CELLS]
    text = markdown(rows)
    print(text[:3000])
    (out / "diag_prelaunch_v48.json").write_text(json.dumps({"meta": bench_meta(), "rows": rows}, indent=1))
    (out / "diag_prelaunch_v48.md").write_text(json.dumps(bench_meta()) + "\n\n" + text + "\n")


if __name__ == "__main__":
    main()
