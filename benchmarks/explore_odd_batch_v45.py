"""v45: fp32 training calls at B = 5-8 under "auto" (the rows backward from H=1024) and with the grid backward
(BACKWARD_BY_ROWS=False), alternated in one process, fwd+bwd ms per call (T=256, input = hidden): whether fp32 B=7's
slow backward (profile_batch7_v45: the rows kernel 2.28 ms at B=7 against 1.66 at B=6 and 1.51 at B=8) is the rows
kernel's.

    python benchmarks/explore_odd_batch_v45.py OUT_DIR [--rounds N] [--repeats N] [--set N]
Writes OUT_DIR/explore_odd_batch_v45_setN.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent import bench_args, bench_meta, measure_rows, training_call  # noqa: E402

CELL_SETS = {1: [("float32", 1024, b) for b in (5, 6, 7, 8)] + [("float32", 1280, 7), ("float32", 768, 7)],
             # 2: the rest of the rows rule's cells (rules.rows_backward_pays: H >= 1024, B >= 4; the rows kernel fits
             # at H=1024 only)
             2: [("float32", 1024, b) for b in (4, 9, 10, 11, 12, 14, 16)]}
MODES = {"auto": {}, "grid backward": {"BACKWARD_BY_ROWS": False}}


def _row(dtype, hidden, batch, rounds, repeats):
    from ecornn import LSTMConfig
    from ecornn.engines import persistent
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 256)
    modes, errors = ab_modes.plannable_modes(config, MODES, train=True)
    kinds = {}
    for mode, flags in modes.items():
        ab_modes.set_engine_flags(flags)
        try:
            kinds[mode] = persistent.plans_for(config, True)["backward"].describe()
        finally:
            ab_modes.set_engine_flags({})
    times = ab_modes.alternate_calls(modes, lambda: training_call(dtype, hidden, batch)[0], rounds, repeats)
    return {"dtype": dtype, "hidden": hidden, "batch": batch, "train_ms": times, "backward": kinds, "errors": errors}


def markdown(rows) -> str:
    lines = ["| H | B | " + " | ".join(f"fwd+bwd ms {m} (median; rounds)" for m in MODES) + " | backward plans |",
             "|---|---|" + "---|" * (len(MODES) + 1)]
    for r in rows:
        cells = []
        for m in MODES:
            t = r["train_ms"].get(m)
            cells.append(f"{np.median(t):.3f} ({', '.join(f'{v:.2f}' for v in t)})" if t else r["errors"].get(m, "–"))
        lines.append(f"| {r['hidden']} | {r['batch']} | " + " | ".join(cells) + " | "
                     + "; ".join(f"{m}: {d}" for m, d in r["backward"].items()) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    def configure(parser):
        parser.add_argument("--rounds", type=int, default=3)
        parser.add_argument("--set", type=int, default=1, choices=sorted(CELL_SETS))
    args, out = bench_args(argv, repeats=10, configure=configure)
    measure_rows(out, f"explore_odd_batch_v45_set{args.set}", bench_meta(), CELL_SETS[args.set],
                 lambda d, h, b: _row(d, h, b, args.rounds, args.repeats), markdown)


if __name__ == "__main__":
    main()
