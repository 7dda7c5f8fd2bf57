"""v57 diagnostic: what a replayed forward costs apart from its steps (the intercept of time against T).

For each cell and sequence length T the bare graph is replayed under CUPTI (each node's device time, the gaps) and
the whole forward is timed as the benches time a call. A straight line a + b T through each node's time says how much
of it does not scale with T: the forward kernel's launch, prologue (register tiles loaded) and epilogue, the fixed
nodes (fetch, copies, memset), and the host's time before the launch (span - bare).

    python benchmarks/diag_intercept_v57.py OUT_DIR [--repeats N] [--cells ...] [--steps 16,64,256]
Writes OUT_DIR/diag_intercept_v57.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_persistent  # noqa: E402
from bench_persistent import _problem, bench_args, bench_meta, measure_rows  # noqa: E402
from diag_replay_span_v56 import cupti_parts, event_span_us, parse_cells  # noqa: E402

CELLS = "float32:1024:8,float32:1024:4,float16:1024:16"


def at_steps(dtype, hidden, batch, steps, repeats) -> dict:
    import cupy as cp
    from ecornn.engines import persistent
    bench_persistent.STEPS = steps   # _problem's T
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch + steps)
    prepared = persistent.prepare(config, weights)
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    for _ in range(4):   # eager, capture, warm replays
        fwd()
    entry = next(iter(prepared.graphs.values()))
    bare = lambda: entry.launch_bare(cp.cuda.get_current_stream())  # noqa: E731
    span = float(np.median([event_span_us(fwd, repeats) for _ in range(3)]))
    bare_us = float(np.median([event_span_us(bare, repeats) for _ in range(3)]))
    parts = cupti_parts(bare, repeats)
    return {"steps": steps, "span": span, "bare": bare_us, "cupti": parts}


def line(ts, values) -> tuple:
    """(intercept, slope) of the least-squares line through (T, value)."""
    slope, intercept = np.polyfit(np.asarray(ts, float), np.asarray(values, float), 1)
    return float(intercept), float(slope)


def cell_row(dtype, hidden, batch, repeats, steps) -> dict:
    runs = [at_steps(dtype, hidden, batch, t, repeats) for t in steps]
    row = {"dtype": dtype, "hidden": hidden, "batch": batch, "runs": runs}
    ok = [r for r in runs if "error" not in r["cupti"]]
    fits = {"span": line([r["steps"] for r in runs], [r["span"] for r in runs]),
            "bare": line([r["steps"] for r in runs], [r["bare"] for r in runs])}
    if ok and len({len(r["cupti"]["nodes"]) for r in ok}) == 1:
        for k, (name, _) in enumerate(ok[0]["cupti"]["nodes"]):
            fits[f"{k}:{name[:28]}"] = line([r["steps"] for r in ok], [r["cupti"]["nodes"][k][1] for r in ok])
        fits["gaps"] = line([r["steps"] for r in ok], [sum(r["cupti"]["gaps"]) for r in ok])
    row["fits"] = fits
    return row


def markdown(rows) -> str:
    lines = ["Lines a + b T through each part's µs (a: µs per call, b: µs per step)", "",
             "| cell | part | a (µs) | b (µs/step) |", "|---|---|---|---|"]
    for r in rows:
        for part, (a, b) in r["fits"].items():
            lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {part} | {a:.1f} | {b:.4f} |")
    lines += ["", "| cell | T | span µs | bare µs | nodes (µs) |", "|---|---|---|---|---|"]
    for r in rows:
        for run in r["runs"]:
            c = run["cupti"]
            nodes = c.get("error") or ", ".join(f"{n[:20]} {t:.1f}" for n, t in c["nodes"])
            lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {run['steps']} | {run['span']:.1f} | "
                         f"{run['bare']:.1f} | {nodes} |")
    return "\n".join(lines)


def main_over_steps(argv, stem: str, default_steps: str, cell_row, markdown) -> None:
    """OUT_DIR [--repeats N] [--cells ...] [--steps ...]: cell_row(dtype, hidden, batch, repeats, steps) per cell,
    saved as OUT_DIR/stem.{json,md} (this diagnostic and diag_prologue_v57)."""
    def configure(p):
        p.add_argument("--cells", default=CELLS)
        p.add_argument("--steps", default=default_steps)
    args, out = bench_args(argv, repeats=20, configure=configure)
    steps = [int(t) for t in args.steps.split(",")]
    measure_rows(out, stem, bench_meta(), parse_cells(args.cells), lambda *cell: cell_row(*cell, args.repeats, steps),
                 markdown)


def main(argv=None):
    main_over_steps(argv, "diag_intercept_v57", "16,64,256", cell_row, markdown)


if __name__ == "__main__":
    main()
