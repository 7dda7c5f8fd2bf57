"""v60 diagnostic: what the host's path before a replayed forward's launch costs now, layer by layer.

The benches time a call between two CUDA events after a device sync, so everything the host does before
cudaGraphLaunch is on the span (the GPU idles). Per cell, the event span (median of N, modes alternated by round) of:
- `forward`: persistent.forward (the mode tuple, the graph key and its lookup, then `_launch`);
- `_launch`: persistent_graph._launch on the looked-up entry (the ring's publish, the output buffer, the launch);
- `bare`: the graph replayed on its last inputs (the ring republished, launched).
forward - _launch is the mode, key and lookup; _launch - bare the publish and the output buffer.
Also each host primitive of that path timed alone right after a device sync (perf_counter_ns, median of N).

    python benchmarks/diag_host_layers_v60.py OUT_DIR [--repeats N] [--rounds R] [--cells float32:1024:8,...]
Writes OUT_DIR/diag_host_layers_v60.{json,md}.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _problem, bench_args, bench_meta, save_rows  # noqa: E402
from diag_replay_span_v56 import parse_cells  # noqa: E402

CELLS = "float32:1024:8,float32:1024:4,float16:1024:16"


def _span_us(cp, fn) -> float:
    cp.cuda.Device().synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) * 1e3


def _busy_us(us: float) -> None:
    """The host busy for ``us`` µs (is host time before the launch on the span?)."""
    end = time.perf_counter_ns() + us * 1e3
    while time.perf_counter_ns() < end:
        pass


def _after_sync_ns(cp, fn) -> float:
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e3


def _primitives(cp, persistent, persistent_graph, config, x, h0, c0, prepared) -> dict:
    mode = persistent._graph_mode("auto")
    key = persistent_graph._key(config, mode, x, h0, c0)
    graphs = prepared.graphs
    event = cp.cuda.Event(disable_timing=True)
    return {
        "_graph_mode": lambda: persistent._graph_mode("auto"),
        "_key": lambda: persistent_graph._key(config, mode, x, h0, c0),
        "lookup (hash)": lambda: graphs.get(key),
        "getDevice": cp.cuda.runtime.getDevice,
        "get_current_stream": cp.cuda.get_current_stream,
        "x.data.ptr": lambda: x.data.ptr,
        "event.record": lambda: event.record(cp.cuda.get_current_stream()),
        "cp.empty 64 KB": lambda: cp.empty((16384,), np.float32),
        "nothing": lambda: None,
    }


def cell_row(dtype, hidden, batch, repeats, rounds) -> dict:
    import cupy as cp
    from ecornn.engines import persistent, persistent_graph
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch)
    prepared = persistent.prepare(config, weights)
    for _ in range(3):
        persistent.forward(config, x, weights, h0, c0, prepared=prepared)
    entry = next(iter(prepared.graphs.values()))
    modes = {
        "forward": lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared),
        "_launch": lambda: persistent_graph._launch(entry, x, h0, c0),
        "bare": lambda: entry.launch_bare(cp.cuda.get_current_stream()),
        "bare after 20 µs": lambda: (_busy_us(20), entry.launch_bare(cp.cuda.get_current_stream())),
    }
    spans = {m: [] for m in modes}
    for _ in range(rounds):
        for name, fn in modes.items():
            spans[name] += [_span_us(cp, fn) for _ in range(repeats)]
    prims = _primitives(cp, persistent, persistent_graph, config, x, h0, c0, prepared)
    host = {name: float(np.median([_after_sync_ns(cp, fn) for _ in range(repeats)])) for name, fn in prims.items()}
    med = {m: float(np.median(v)) for m, v in spans.items()}
    return {"dtype": dtype, "hidden": hidden, "batch": batch, "span_us": med,
            "span_us_per_step": {m: v / STEPS for m, v in med.items()}, "host_after_sync_us": host}


def markdown(rows) -> str:
    lines = ["| cell | forward µs | _launch µs | bare µs | bare after 20 µs | forward - _launch | _launch - bare |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["span_us"]
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {s['forward']:.1f} | {s['_launch']:.1f} | "
                     f"{s['bare']:.1f} | {s['bare after 20 µs']:.1f} | {s['forward'] - s['_launch']:.1f} | {s['_launch'] - s['bare']:.1f} |")
    lines += ["", "Host primitives alone after a device sync (µs, median):", ""]
    names = list(rows[0]["host_after_sync_us"])
    lines += ["| cell | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for r in rows:
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | "
                     + " | ".join(f"{r['host_after_sync_us'][n]:.2f}" for n in names) + " |")
    return "\n".join(lines)


def diag_main(argv, stem: str, row, markdown, cells: str, rounds: int = 4, configure=None, before=None) -> None:
    """The v60 diagnostics' command line: OUT_DIR [--repeats N] [--rounds R] [--cells dtype:H:B,...] [--name NAME]
    (and what ``configure(parser)`` adds); ``before(args)``, then ``row(dtype, hidden, batch, repeats, rounds)`` per
    cell; the table printed and saved as OUT_DIR/NAME.{json,md} (NAME: ``stem``)."""
    def setup(parser):
        parser.add_argument("--rounds", type=int, default=rounds)
        parser.add_argument("--cells", default=cells)
        parser.add_argument("--name", default=stem)
        if configure is not None:
            configure(parser)
    args, out = bench_args(argv, repeats=100, configure=setup)
    if before is not None:
        before(args)
    rows = [row(*cell, args.repeats, args.rounds) for cell in parse_cells(args.cells)]
    text = markdown(rows)
    print(text)
    save_rows(out, args.name, bench_meta(), rows, text)


def _front_branch(args) -> None:
    from ecornn.engines import persistent_graph
    persistent_graph.FRONT_BRANCH = bool(args.front_branch)


def main(argv=None):
    diag_main(argv, "diag_host_layers_v60", cell_row, markdown, CELLS, configure=lambda p: p.add_argument(
        "--front-branch", type=int, default=1, help="persistent_graph.FRONT_BRANCH (0: v58's graph)"), before=_front_branch)


if __name__ == "__main__":
    main()
