"""v56 diagnostic: where a replayed inference forward's event span goes, in three parts.

The benches time a call between two CUDA events after a device sync (ecornn.timing.median_seconds). That span is
(a) the host's time before the graph starts, (b) the graph's nodes and (c) the gaps between them. Here, per cell:
- `span`: the benches' event span of one call (median of N);
- `bare`: the same graph replayed alone between two events (persistent_graph.launch_bare): span - bare is (a);
- CUPTI through torch.profiler: each node's start and end per call, so the nodes' summed time, the first start to
  last end (nodes + gaps) and the gaps themselves, in order.

    python benchmarks/diag_replay_span_v56.py OUT_DIR [--repeats N] [--cells float32:1024:8,...]
Writes OUT_DIR/diag_replay_span_v56.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _problem, bench_args, bench_meta, measure_rows  # noqa: E402

CELLS = "float32:1024:8,float32:1024:4,float16:1024:16,bfloat16:1024:4"


def parse_cells(text: str) -> list:
    out = []
    for cell in text.split(","):
        dtype, hidden, batch = cell.split(":")
        out.append((dtype, int(hidden), int(batch)))
    return out


def event_span_us(fn, repeats: int) -> float:
    import cupy as cp
    from ecornn.timing import median_seconds
    return 1e6 * median_seconds(fn, repeats, xp=cp, warmup=3)


def calls_of(events: list, per_call: int) -> list:
    """Device events (name, start, end) sorted by start, cut into calls of ``per_call`` events each."""
    events = sorted(events, key=lambda e: e[1])
    return [events[k:k + per_call] for k in range(0, len(events) - per_call + 1, per_call)]


def call_parts(call: list) -> dict:
    """Nodes' summed time, first start to last end, and the gaps between consecutive nodes (µs)."""
    busy = sum(end - start for _, start, end in call)
    gaps = [max(0.0, call[k + 1][1] - max(e for _, _, e in call[:k + 1])) for k in range(len(call) - 1)]
    return {"busy": busy, "first_to_last": call[-1][2] - call[0][1], "gaps": gaps,
            "nodes": [(name, end - start) for name, start, end in call]}


def cupti_parts(fn, repeats: int) -> dict:
    import cupy as cp
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity
    cp.cuda.Device().synchronize()
    with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            fn()
            cp.cuda.Device().synchronize()
    events = [(e.name, e.time_range.start, e.time_range.end) for e in prof.events()
              if e.device_type == DeviceType.CUDA]
    if not events or len(events) % repeats:
        return {"error": f"{len(events)} device events over {repeats} calls"}
    parts = [call_parts(c) for c in calls_of(events, len(events) // repeats)]
    med = lambda key: float(np.median([p[key] for p in parts]))  # noqa: E731
    nodes = [(name[:60], float(np.median([p["nodes"][k][1] for p in parts])))
             for k, (name, _) in enumerate(parts[0]["nodes"])]
    gaps = [float(np.median([p["gaps"][k] for p in parts])) for k in range(len(parts[0]["gaps"]))]
    return {"busy": med("busy"), "first_to_last": med("first_to_last"), "nodes": nodes, "gaps": gaps}


def cell_row(dtype, hidden, batch, repeats) -> dict:
    import cupy as cp
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    for _ in range(4):   # eager, capture, warm replays
        fwd()
    entry = next(iter(prepared.graphs.values()))
    stream = cp.cuda.get_current_stream()
    bare = lambda: entry.launch_bare(stream)  # noqa: E731
    span, bare_us = [], []
    for _ in range(3):   # alternated, so a drift reaches both
        span.append(event_span_us(fwd, repeats))
        bare_us.append(event_span_us(bare, repeats))
    row = {"dtype": dtype, "hidden": hidden, "batch": batch, "span": float(np.median(span)),
           "bare": float(np.median(bare_us)), "span_us_per_step": float(np.median(span)) / STEPS}
    row["host_before_graph"] = row["span"] - row["bare"]
    row["cupti"] = cupti_parts(fwd, repeats)
    return row


def markdown(rows) -> str:
    lines = ["| cell | span µs | bare graph | span - bare (host) | CUPTI first→last | nodes' sum | gaps | span µs/step |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["cupti"]
        first, busy = c.get("first_to_last", float("nan")), c.get("busy", float("nan"))
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {r['span']:.1f} | {r['bare']:.1f} | "
                     f"{r['host_before_graph']:.1f} | {first:.1f} | {busy:.1f} | {first - busy:.1f} | "
                     f"{r['span_us_per_step']:.3f} |")
    for r in rows:
        c = r["cupti"]
        lines += ["", f"**{r['dtype']} H={r['hidden']} B={r['batch']}** nodes in order (µs; the gap before each)", ""]
        lines += node_lines(c)
    return "\n".join(lines)


def node_lines(parts: dict) -> list:
    """cupti_parts' nodes as markdown list lines (each with the gap before it), or its error."""
    if "error" in parts:
        return [parts["error"]]
    gaps = [0.0] + parts["gaps"]
    return [f"- {name}: {t:.1f} (gap {g:.1f})" for (name, t), g in zip(parts["nodes"], gaps)]


def main(argv=None):
    args, out = bench_args(argv, repeats=30, configure=lambda p: p.add_argument("--cells", default=CELLS))
    measure_rows(out, "diag_replay_span_v56", bench_meta(), parse_cells(args.cells),
                 lambda *cell: cell_row(*cell, args.repeats), markdown)


if __name__ == "__main__":
    main()
