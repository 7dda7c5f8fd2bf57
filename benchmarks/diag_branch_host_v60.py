"""v60 diagnostic: why a front-branch graph's replay (v59) spends more of the span between the call and its launch.

Call 2 of v60 (diag_host_layers_v60, one process per setting) read fp32 H=1024 B=8's `_launch` - `bare` at 18.3 µs
with v59's front branch and 5.8 without, the bare graph the same. Here both settings live in one process (as in
v59's A/B) and per setting: whether the graph writes in place, the event spans of forward / _launch / bare
(alternated by round), and the CUPTI nodes of one `_launch` and one `bare` call (names, times, gaps).

    python benchmarks/diag_branch_host_v60.py OUT_DIR [--repeats N] [--rounds R] [--cells float32:1024:8,...]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import _problem  # noqa: E402
from diag_host_layers_v60 import _span_us, diag_main  # noqa: E402
from diag_replay_span_v56 import cupti_parts, node_lines  # noqa: E402


def _entries(persistent, persistent_graph, config, x, weights, h0, c0, prepared) -> dict:
    """The replayed graph of each FRONT_BRANCH setting (captured in this process)."""
    entries = {}
    for branch in (True, False):
        persistent_graph.FRONT_BRANCH = branch
        for _ in range(4):
            persistent.forward(config, x, weights, h0, c0, prepared=prepared)
        entries[branch] = next(reversed(prepared.graphs.values()))   # the last replayed (move_to_end)
    return entries


def cell_row(dtype, hidden, batch, repeats, rounds) -> dict:
    import cupy as cp
    from ecornn.engines import persistent, persistent_graph
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch)
    prepared = persistent.prepare(config, weights)
    entries = _entries(persistent, persistent_graph, config, x, weights, h0, c0, prepared)
    stream = cp.cuda.get_current_stream()

    def modes(branch):
        entry = entries[branch]

        def forward():
            persistent_graph.FRONT_BRANCH = branch
            persistent.forward(config, x, weights, h0, c0, prepared=prepared)
        return {"forward": forward, "_launch": lambda: persistent_graph._launch(entry, x, h0, c0),
                "bare": lambda: entry.launch_bare(stream)}
    spans = {(b, m): [] for b in entries for m in modes(b)}
    for _ in range(rounds):
        for b in entries:
            for m, fn in modes(b).items():
                spans[b, m] += [_span_us(cp, fn) for _ in range(repeats)]
    row = {"dtype": dtype, "hidden": hidden, "batch": batch,
           "in_place": {str(b): entries[b].in_place for b in entries},
           "kind": {str(b): entries[b].kind for b in entries},
           "span_us": {f"{b}/{m}": float(np.median(v)) for (b, m), v in spans.items()}, "cupti": {}}
    for b in entries:
        for m in ("_launch", "bare"):
            row["cupti"][f"{b}/{m}"] = cupti_parts(modes(b)[m], 20)
    persistent_graph.FRONT_BRANCH = True
    return row


def markdown(rows) -> str:
    lines = []
    for r in rows:
        lines += [f"### {r['dtype']} H={r['hidden']} B={r['batch']}: in place {r['in_place']}, kind {r['kind']}", "",
                  "| branch/mode | span µs |", "|---|---|"]
        lines += [f"| {k} | {v:.1f} |" for k, v in r["span_us"].items()]
        for k, c in r["cupti"].items():
            lines += ["", f"CUPTI {k}: first→last {c.get('first_to_last', float('nan')):.1f} µs", ""]
            lines += node_lines(c)
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    diag_main(argv, "diag_branch_host_v60", cell_row, markdown, "float32:1024:8", rounds=3)


if __name__ == "__main__":
    main()
