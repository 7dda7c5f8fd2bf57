"""v56 diagnostic: the host time a replayed forward spends before its graph starts, layer by layer.

diag_replay_span_v56 found 26-45 µs between the benches' start event and the graph's first node (0.10-0.18 µs/step
at T=256). Here the same graph is entered at each layer of the call path, and each entry is timed as the benches time
a call (events around it, after a device sync); the differences between layers are what each layer adds:
- `bare`: persistent_graph.launch_bare (the ring republished, the graph launched);
- `bare_then_10us`: the same with the host busy 10 µs between the launch and its next CUDA call (the event record):
  whether the host's work after a launch reaches the span;
- `launch_with_copies`: the ring's publish of the caller's inputs, the launch, the copies out (none where the graph
  writes its outputs in place, OUTPUTS_IN_PLACE);
- `replay`: persistent_graph.replay with the mode tuple made beforehand (the graph key and its lookup);
- `forward`: persistent.forward (its mode tuple, the replay, the kinds kept).
Modes are alternated round by round. Also the host's own time of a few single pieces after a device sync.

    python benchmarks/diag_replay_layers_v56.py OUT_DIR [--repeats N] [--rounds R] [--cells ...]
Writes OUT_DIR/diag_replay_layers_v56.{json,md}.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import _problem, bench_args, bench_meta, measure_rows  # noqa: E402
from diag_replay_span_v56 import CELLS, event_span_us, parse_cells  # noqa: E402

LAYERS = ("bare", "bare_then_10us", "publish_launch", "launch_with_copies", "replay", "forward")
HOST_BUSY_NS = 10_000   # bare_then_10us: the host busy this long between the launch and its next CUDA call


def entries(config, weights, prepared, x, h0, c0) -> dict:
    import cupy as cp
    from ecornn.engines import persistent, persistent_graph as pg
    entry = next(iter(prepared.graphs.values()))
    mode = persistent._graph_mode("auto")

    def publish_launch():   # launch_with_copies without its copies out
        with pg._LOCK:
            stream = cp.cuda.get_current_stream()
            pg._after_last_replay(stream)
            kept = entry.ring.publish((x, h0, c0), pg._wait_for_last_replay)
            entry.graph.launch(stream=stream)
            entry.ring.launched()
            del kept
            pg._mark_replay(stream)

    def bare_then_busy():   # does host work after the launch, before the next CUDA call, delay the graph's start?
        with pg._LOCK:
            stream = cp.cuda.get_current_stream()
            entry.ring.republish(pg._wait_for_last_replay)
            entry.graph.launch(stream=stream)
            entry.ring.launched()
            until = time.perf_counter_ns() + HOST_BUSY_NS
            while time.perf_counter_ns() < until:
                pass
            pg._mark_replay(stream)

    def with_copies():
        with pg._LOCK:
            return pg.launch_with_copies(entry.graph, entry.inputs, (x, h0, c0), entry.outputs, x.dtype, entry.ring,
                                         entry.moved)
    return {"bare": lambda: entry.launch_bare(cp.cuda.get_current_stream()), "bare_then_10us": bare_then_busy,
            "publish_launch": publish_launch, "launch_with_copies": with_copies,
            "replay": lambda: pg.replay(prepared, config, mode, x, h0, c0),
            "forward": lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)}


def host_pieces(config, prepared, x, h0, c0, calls: int) -> dict:
    """Median host µs of single pieces, each right after a device sync (as the benches' calls start)."""
    import cupy as cp
    from ecornn.engines import persistent, persistent_graph as pg
    entry = next(iter(prepared.graphs.values()))
    mode = persistent._graph_mode("auto")
    pieces = {
        "get_current_stream": lambda: cp.cuda.get_current_stream(),
        "runtime.getDevice": lambda: cp.cuda.runtime.getDevice(),
        "_graph_mode": lambda: persistent._graph_mode("auto"),
        "graph key": lambda: pg._key(config, mode, x, h0, c0),
        "key lookup": lambda: prepared.graphs.get(pg._key(config, mode, x, h0, c0)),
        "output buffer": lambda: cp.empty(entry.outputs.buffer.shape, entry.outputs.buffer.dtype),
        "ring publish": lambda: entry.ring.publish((x, h0, c0), pg._wait_for_last_replay),
        "three data.ptr": lambda: (x.data.ptr, h0.data.ptr, c0.data.ptr),
        "perf_counter pair": lambda: None,
    }
    out = {}
    for name, fn in pieces.items():
        times = []
        for _ in range(calls):
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter_ns()
            fn()
            times.append((time.perf_counter_ns() - t0) / 1e3)
            if name == "ring publish":   # the launch that takes the slot (the ring's count stays in step)
                entry.graph.launch(stream=cp.cuda.get_current_stream())
                entry.ring.launched()
        out[name] = float(np.median(times))
    return out


def cupti_nodes(fn, repeats) -> dict:
    """Per device node name: median µs per call (CUPTI), and the calls' first start to last end."""
    from diag_replay_span_v56 import cupti_parts
    parts = cupti_parts(fn, repeats)
    if "error" in parts:
        return parts
    return {"first_to_last": parts["first_to_last"], "nodes": parts["nodes"]}


def cell_row(dtype, hidden, batch, repeats, rounds) -> dict:
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    for _ in range(4):   # eager, capture, warm replays
        persistent.forward(config, x, weights, h0, c0, prepared=prepared)
    fns = entries(config, weights, prepared, x, h0, c0)
    spans = {k: [] for k in LAYERS}
    for _ in range(rounds):
        for k in LAYERS:
            spans[k].append(event_span_us(fns[k], repeats))
    row = {"dtype": dtype, "hidden": hidden, "batch": batch, "spans": spans,
           "median": {k: float(np.median(v)) for k, v in spans.items()}}
    row["pieces"] = host_pieces(config, prepared, x, h0, c0, 200)
    row["cupti"] = {k: cupti_nodes(fns[k], repeats) for k in ("bare", "launch_with_copies")}
    return row


def markdown(rows) -> str:
    lines = ["| cell | " + " | ".join(LAYERS) + " | added: 10 µs after the launch | publish | copies | replay | forward |",
             "|---|" + "---|" * (len(LAYERS) + 5)]
    for r in rows:
        m = r["median"]
        added = [m["bare_then_10us"] - m["bare"], m["publish_launch"] - m["bare"],
                 m["launch_with_copies"] - m["publish_launch"], m["replay"] - m["launch_with_copies"],
                 m["forward"] - m["replay"]]
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | " + " | ".join(f"{m[k]:.1f}" for k in LAYERS)
                     + " | " + " | ".join(f"{a:+.1f}" for a in added) + " |")
    lines += ["", "Host µs of single pieces after a device sync (median):", "",
              "| cell | " + " | ".join(rows[0]["pieces"]) + " |", "|---|" + "---|" * len(rows[0]["pieces"])]
    for r in rows:
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | "
                     + " | ".join(f"{v:.2f}" for v in r["pieces"].values()) + " |")
    for r in rows:
        for layer, c in r.get("cupti", {}).items():
            nodes = c.get("nodes", [])
            lines += ["", f"CUPTI {r['dtype']} H={r['hidden']} B={r['batch']} `{layer}`: first→last "
                      f"{c.get('first_to_last', float('nan')):.1f} µs; " + ", ".join(f"{n[:24]} {t:.1f}" for n, t in nodes)]
    return "\n".join(lines)


def main(argv=None):
    def configure(p):
        p.add_argument("--cells", default=CELLS)
        p.add_argument("--rounds", type=int, default=4)
    args, out = bench_args(argv, repeats=30, configure=configure)
    measure_rows(out, "diag_replay_layers_v56", bench_meta(), parse_cells(args.cells),
                 lambda *cell: cell_row(*cell, args.repeats, args.rounds), markdown)


if __name__ == "__main__":
    main()
