"""v55 diagnostic: v37's step clocks of one forward split by step % period, to see what the steps that staged x of
several steps at once (X_STEPS, commit 8d9e3f5, removed: slower) cost against the steps that staged none. The period is
the flags' X_STEPS where given (that commit's engine), else 4; on this engine DIAG_X_STAGE_EVERY=4 is the analogue.

    python benchmarks/diag_x_steps_v55.py OUT_DIR [--cells float16:1024:16 ...] [--flags '{"DIAG_X_STAGE_EVERY": 4}']
Writes OUT_DIR/diag_x_steps_v55.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import diag_step_clocks_v37 as clocks  # noqa: E402
from bench_persistent import _problem, bench_meta, kernel_launcher, save_rows  # noqa: E402


def by_phase_of_step(record, warps: int, period: int) -> dict:
    """{step % period: median ns of each phase (clocks.phases over the steps of that residue)}."""
    out = {}
    steps = record.shape[1]
    for r in range(period):
        keep = [s for s in range(clocks.SKIP_STEPS, steps - 1) if s % period == r]
        # phases() wants consecutive steps: each kept step with the one before (its publish) and after (its end)
        parts = [clocks.phases(record[:, s - 1:s + 2], warps, skip=1)["ns"] for s in keep]
        out[r] = {k: float(np.median([p[k] for p in parts])) for k in parts[0]}
    return out


def main(argv=None):
    args, out = clocks.cell_args(argv, [("float16", 1024, 16)])
    from ecornn.engines import persistent
    import cupy as cp
    for flag, value in args.flags.items():
        if not hasattr(persistent, flag):   # set, it would be ignored: the timings would be the default's
            raise ValueError(f"--flags: expected engine flags of ecornn.engines.persistent, got {flag!r}")
        setattr(persistent, flag, value)
    steps = args.flags.get("X_STEPS", args.flags.get("DIAG_X_STAGE_EVERY", 1))
    period = int(steps) if str(steps).isdigit() and int(steps) > 1 else 4   # one step at a time: residues of 4
    rows = []
    for dtype, hidden, batch in args.cells:
        config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
        prepared = persistent.prepare(config, weights)
        plan = persistent.plans_for(config, False)["forward"]
        persistent.STEP_CLOCKS = clocks.MARKED_STEPS
        try:
            launch = kernel_launcher(config, prepared, x, h0, c0, plan)
            launch()
            launch()
            cp.cuda.Device().synchronize()
            record, final = clocks._record(plan, persistent._final(plan).grid)
        finally:
            persistent.STEP_CLOCKS = 0
        rows.append({"dtype": dtype, "hidden": hidden, "batch": batch, "plan": final.describe(), "period": period,
                     "by_step_mod": by_phase_of_step(record, final.warps, period)})
        print(rows[-1], flush=True)
    lines = ["| cell | step % period | stage (median / last warp) | product | partials | pointwise | after publish | "
             "step | publish spread |", "|" + "---|" * 9]
    for r in rows:
        for m, n in r["by_step_mod"].items():
            lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {m} | {n['stage_median_warp']:.0f} / "
                         f"{n['stage_last_warp']:.0f} | {n['product_median_warp']:.0f} | {n['partials']:.0f} | "
                         f"{n['pointwise']:.0f} | {n['barrier']:.0f} | {n['step']:.0f} | {n['publish_spread']:.0f} |")
    md = "\n".join(lines) + "\n\nns, medians over blocks (the steps of each residue: their own medians' median).\n"
    save_rows(out, "diag_x_steps_v55", {**bench_meta(), "flags": args.flags}, rows, md)
    print(md)


if __name__ == "__main__":
    main()
