"""v26 in multi-layer and bidirectional calls (two directions in one grid): the whole forward (graph
replay) and fwd+bwd of v26 against v25's exchange rule (bench_persistent_v26.MODES), alternated over
rounds after a warm-up round, as ab_alternate.py does for one layer. T=256, input = hidden, random
non-zero inputs, CUDA events, medians.

    python benchmarks/ab_v26_layers.py OUT_DIR [--rounds N] [--repeats N] [--only DTYPE]
Writes OUT_DIR/ab_v26_layers.{json,md} and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
import bench_persistent as bp  # noqa: E402
from bench_persistent_v26 import MODES  # noqa: E402
from bench_persistent_v5 import _train_ms  # noqa: E402

# (dtype, hidden, batch, layers, bidirectional)
CELLS = [("float16", 512, 8, 2, True), ("bfloat16", 768, 8, 2, True), ("float16", 1024, 8, 3, False),
         ("float32", 1024, 4, 2, True), ("float32", 1024, 4, 2, False)]


def time_cell(cell, rounds, repeats):
    from ecornn.engines import persistent
    problem = ab_modes.cell_problem(cell)

    def measure():
        prepared = persistent.prepare(problem[0], problem[1])
        return {"fwd": ab_modes.whole_forward_us(*problem, prepared, repeats),
                "train": _train_ms(*problem, prepared, repeats),
                "plan": persistent.plans_for(problem[0], True)["forward"].describe()}
    return ab_modes.alternate_rounds(MODES, rounds, measure)


def _options(parser):
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=None, help="time only the cells of this dtype")


def main(argv=None):
    args, out_dir = bp.bench_args(argv, repeats=10, configure=_options)
    rows, lines = [], ["| dtype | H | B | layers | bidir | fwd µs/step v26 | v25 | fwd+bwd ms v26 | v25 |",
                       "|---|---|---|---|---|---|---|---|---|"]
    for cell in (c for c in CELLS if args.only in (None, c[0])):
        t = time_cell(cell, args.rounds, args.repeats)
        rows.append({"cell": cell, **t})
        med = lambda m, k: f"{np.median(t[m][k]):.3f}"  # noqa: E731
        lines.append(f"| {' | '.join(map(str, cell))} | {med('v26', 'fwd')} | {med('v25', 'fwd')} | "
                     f"{med('v26', 'train')} | {med('v25', 'train')} |")
        print(lines[-1], t["v26"]["plan"][-1], "/", t["v25"]["plan"][-1], flush=True)
        bp.save_rows(out_dir, "ab_v26_layers", bp.bench_meta(), rows, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
