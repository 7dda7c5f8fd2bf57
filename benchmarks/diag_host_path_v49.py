"""v49 diagnostic: where a replayed inference forward's host time before cudaGraphLaunch goes, piece by piece.

v48 (diag_prelaunch_v48) found 10-21 µs from the call to the launch (median 20-21 at fp32 H=1024 B=4 and B=8, 12-13
at 16-bit), all on the benches' event span since the GPU is idle before it. Here the replay path's functions are
wrapped to stamp perf_counter_ns at their entry (and the ring's publish at its exit), so the medians of the gaps
say which piece holds the time, after a device sync (as the benches call) and back to back without one.

    python benchmarks/diag_host_path_v49.py OUT_DIR [--calls N]
Writes OUT_DIR/diag_host_path_v49.md and .json.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import _problem, bench_args, bench_meta, save_rows  # noqa: E402

CELLS = [("float32", 1024, 4), ("float32", 1024, 8), ("bfloat16", 1024, 4)]
MARKS = ("call", "replay", "launch", "publish", "published", "graph launch", "launched", "returned")


class Stamps:
    """perf_counter_ns at named points of one call."""

    def __init__(self):
        self.now = {}

    def mark(self, name):
        self.now[name] = time.perf_counter_ns()


def _stamped(stamps, name, fn, after=None):
    def wrapper(*args, **kwargs):
        stamps.mark(name)
        out = fn(*args, **kwargs)
        if after:
            stamps.mark(after)
        return out
    return wrapper


class GraphStamp:
    def __init__(self, graph, stamps):
        self.graph, self.stamps = graph, stamps

    def launch(self, stream=None):
        self.stamps.mark("graph launch")
        self.graph.launch(stream=stream)
        self.stamps.mark("launched")


def cell_row(dtype, hidden, batch, calls) -> dict:
    import cupy as cp
    from ecornn.engines import persistent, persistent_graph
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch)
    prepared = persistent.prepare(config, weights)
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    for _ in range(3):
        fwd()
    cp.cuda.Device().synchronize()
    entry = next(iter(prepared.graphs.values()))
    stamps = Stamps()
    saved = (persistent_graph.replay, persistent_graph._launch, entry.ring.publish, entry.graph)
    persistent_graph.replay = _stamped(stamps, "replay", saved[0])
    persistent_graph._launch = _stamped(stamps, "launch", saved[1])
    entry.ring.publish = _stamped(stamps, "publish", saved[2], after="published")
    entry.graph = GraphStamp(saved[3], stamps)
    rows = {}
    try:
        for synced in (True, False):
            gaps = {f"{a} -> {b}": [] for a, b in zip(MARKS, MARKS[1:])}
            for _ in range(calls):
                if synced:
                    cp.cuda.Device().synchronize()
                stamps.mark("call")
                fwd()
                stamps.mark("returned")
                for a, b in zip(MARKS, MARKS[1:]):
                    gaps[f"{a} -> {b}"].append((stamps.now[b] - stamps.now[a]) / 1e3)
            cp.cuda.Device().synchronize()
            rows["synced" if synced else "back to back"] = {
                k: {"median": float(np.median(v)), "min": float(np.min(v)), "p90": float(np.percentile(v, 90))}
                for k, v in gaps.items()}
    finally:
        persistent_graph.replay, persistent_graph._launch = saved[0], saved[1]
        del entry.ring.publish
        entry.graph = saved[3]
    return {"dtype": dtype, "hidden": hidden, "batch": batch, "gaps": rows}


def markdown(rows) -> str:
    lines = []
    for r in rows:
        lines += [f"### {r['dtype']} H={r['hidden']} B={r['batch']} (µs: median / min / p90)", "",
                  "| piece | after a device sync | back to back |", "|---|---|---|"]
        for piece in r["gaps"]["synced"]:
            cells = [" / ".join(f"{r['gaps'][m][piece][s]:.1f}" for s in ("median", "min", "p90"))
                     for m in ("synced", "back to back")]
            lines.append(f"| {piece} | {cells[0]} | {cells[1]} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    args, out = bench_args(argv, configure=lambda p: p.add_argument("--calls", type=int, default=300))
    meta = bench_meta()
    rows = [cell_row(*cell, args.calls) for cell in CELLS]
    text = markdown(rows)
    print(text)
    save_rows(out, "diag_host_path_v49", meta, rows, text)


if __name__ == "__main__":
    main()
