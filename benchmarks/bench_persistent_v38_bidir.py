"""v38: bidirectional 16-bit and fp32 forwards (both directions in one grid) whose v4 pick rules.v4_warps_kept keeps
(not measured there) against the v19 ranking's pick (REGISTER_MODEL="v19-ranked"): whole forward by graph replay,
1 layer, T=256, input = hidden, alternated rounds (the first dropped).

    python benchmarks/bench_persistent_v38_bidir.py OUT_DIR [--rounds N] [--repeats N]
Writes OUT_DIR/bench_persistent_v38_bidir.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from ab_modes import whole_forward_us  # noqa: E402
from bench_persistent import _problem, bench_args, bench_meta, measure_rows  # noqa: E402

CELLS = [("bfloat16", 1024, 4), ("float16", 1024, 8), ("bfloat16", 1216, 1), ("float16", 704, 2), ("bfloat16", 1088, 2)]
MODES = {"v38": {}, "ranked": {"REGISTER_MODEL": "v19-ranked"}}


def measure(dtype, hidden, batch, rounds, repeats):
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch, bidirectional=True)
    plans = {}

    def one():
        plan = persistent._final(persistent.plans_for(config, False)["forward"])
        plans[plan.describe()] = True
        prepared = persistent.prepare(config, weights)
        return {"fwd": whole_forward_us(config, weights, x, h0, c0, prepared, repeats)}
    times = ab_modes.alternate_rounds(MODES, rounds, one)
    return {"dtype": dtype, "hidden": hidden, "batch": batch, **times, "plans": list(plans)}


def markdown(rows):
    lines = ["| cell (bidirectional) | v38 µs/step (median; rounds) | ranked |", "|---|---|---|"]
    for r in rows:
        cells = [f"{np.median(r[m]['fwd']):.3f} ({', '.join(f'{v:.2f}' for v in r[m]['fwd'])})" for m in MODES]
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\nPlans: " + "; ".join(p for r in rows for p in r["plans"]) + "\n"


def main(argv=None):
    args, out = bench_args(argv, repeats=10, configure=lambda p: p.add_argument("--rounds", type=int, default=3))
    measure_rows(out, "bench_persistent_v38_bidir", bench_meta(), CELLS,
                 lambda *cell: measure(*cell, args.rounds, args.repeats), markdown)


if __name__ == "__main__":
    main()
