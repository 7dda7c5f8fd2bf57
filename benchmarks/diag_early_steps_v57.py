"""v57 diagnostic: where the forward kernel's per-call time goes (its first steps, or before and after its loop).

diag_prologue_v57 found ~10 µs per call in the fp32 H=1024 B=8 forward kernel that does not scale with T, even with
its inputs in L2 (fp16 B=16's: ~3). One marked launch (STEP_CLOCKS = T = 32, v37's step clocks) under CUPTI says
which: the kernel's device time against the span of its marks (the first block's entry, v57's mark, to the last
block's last publish), the blocks' entries and prologues (entry to step 0's top), and the length of each of the first
steps (median over blocks, global timer) against the steady steps. What lies outside the marks is the launch before
the first block starts and the end after the last publish.

    python benchmarks/diag_early_steps_v57.py OUT_DIR [--cells ...]
Writes OUT_DIR/diag_early_steps_v57.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_persistent  # noqa: E402
from bench_persistent import _problem, bench_args, bench_meta, kernel_launcher, measure_rows  # noqa: E402
from diag_intercept_v57 import CELLS  # noqa: E402
from diag_prologue_v57 import kernel_us  # noqa: E402
from diag_replay_span_v56 import parse_cells  # noqa: E402
from diag_step_clocks_v37 import THREAD_MARKS, _record, _since  # noqa: E402

MARKED = 32
TOP_NS, PUBLISHED_NS, ENTRY_NS = (THREAD_MARKS.index(k) for k in ("top_ns", "published_ns", "entry_ns"))


def timeline(record) -> dict:
    """From a record [blocks][steps][slots] (ns): the first block's entry to the last block's last publish, the spreads
    of the entries and of step 0's tops over blocks, the prologues (entry to step 0's top), each step's median length
    over blocks (top to next top) and the last step's top to its publish."""
    rec = np.asarray(record, np.int64)
    top, pub = rec[:, :, TOP_NS], rec[:, :, PUBLISHED_NS]
    entry = rec[:, 0, ENTRY_NS]
    first = entry[np.argmin(_since(entry, entry[0]))]   # the first block's entry
    span = float(_since(pub[:, -1], first).max())
    steps = [float(np.median(_since(top[:, s + 1], top[:, s]))) for s in range(rec.shape[1] - 1)]
    prologue = _since(top[:, 0], entry)
    return {"marks_span_ns": span, "entry_spread_ns": float(np.ptp(_since(entry, first))),
            "step0_top_spread_ns": float(np.ptp(_since(top[:, 0], first))),
            "prologue_median_ns": float(np.median(prologue)), "prologue_max_ns": float(prologue.max()),
            "first_entry_to_last_top0_ns": float(_since(top[:, 0], first).max()),
            "step_ns": steps, "last_top_to_publish_ns": float(np.median(_since(pub[:, -1], top[:, -1])))}


def cell_row(dtype, hidden, batch, repeats, cooperative=True) -> dict:
    """``cooperative``: persistent.CLUSTER_COOPERATIVE (clustered plans launched cooperatively, or not)."""
    from ecornn.engines import persistent
    persistent.CLUSTER_COOPERATIVE = cooperative
    bench_persistent.STEPS = MARKED
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    plan = persistent._built_plans(persistent.run_config(config), False, "auto")["forward"]
    persistent.STEP_CLOCKS = MARKED
    try:
        launch = kernel_launcher(config, prepared, x, h0, c0, plan)
        for _ in range(3):
            launch()
        rows = []
        for _ in range(repeats):
            kernel = kernel_us(launch, None, 1)
            record, final = _record(plan, persistent._final(plan).grid)
            rows.append({"kernel_us": kernel, **timeline(record)})
    finally:
        persistent.STEP_CLOCKS, persistent.CLUSTER_COOPERATIVE = 0, True
    med = lambda k: float(np.median([r[k] for r in rows]))  # noqa: E731
    steps = np.median(np.array([r["step_ns"] for r in rows]), axis=0)
    steady = float(np.median(steps[4:]))
    row = {"dtype": dtype, "hidden": hidden, "batch": batch, "cooperative": cooperative, "plan": final.describe(),
           "kernel_us": med("kernel_us"),
           "marks_span_us": med("marks_span_ns") / 1e3, "step0_top_spread_ns": med("step0_top_spread_ns"),
           **{k: med(k) for k in ("entry_spread_ns", "prologue_median_ns", "prologue_max_ns",
                                  "first_entry_to_last_top0_ns")},
           "step_ns": [float(s) for s in steps], "steady_step_ns": steady,
           "first4_extra_ns": float(steps[:4].sum() - 4 * steady)}
    row["outside_marks_us"] = row["kernel_us"] - row["marks_span_us"]
    return row


def markdown(rows) -> str:
    lines = ["| cell | kernel µs (T=32, marked) | first entry → last publish µs | outside µs | entry spread ns | "
             "prologue median / max ns | first entry → last step-0 top ns | step-0 top spread ns | steady step ns | "
             "first 4 steps' extra ns | steps 0-7 ns |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        first = " ".join(f"{s:.0f}" for s in r["step_ns"][:8])
        launch = "" if r["cooperative"] or "cluster" not in r["plan"] else " (ordinary launch)"
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']}{launch} | {r['kernel_us']:.1f} | {r['marks_span_us']:.1f} | "
                     f"{r['outside_marks_us']:.1f} | {r['entry_spread_ns']:.0f} | {r['prologue_median_ns']:.0f} / "
                     f"{r['prologue_max_ns']:.0f} | {r['first_entry_to_last_top0_ns']:.0f} | "
                     f"{r['step0_top_spread_ns']:.0f} | {r['steady_step_ns']:.0f} | {r['first4_extra_ns']:.0f} | {first} |")
    return "\n".join(lines)


def main(argv=None):
    def configure(p):
        p.add_argument("--cells", default=CELLS)
        p.add_argument("--ordinary", action="store_true", help="each cell again with CLUSTER_COOPERATIVE False")
    args, out = bench_args(argv, repeats=9, configure=configure)
    specs = [cell + (True,) for cell in parse_cells(args.cells)]
    specs += [cell + (False,) for cell in parse_cells(args.cells)] if args.ordinary else []
    measure_rows(out, "diag_early_steps_v57", bench_meta(), specs, lambda *spec: cell_row(*spec[:3], args.repeats, spec[3]),
                 markdown)


if __name__ == "__main__":
    main()
