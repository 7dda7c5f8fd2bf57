"""Two engine-flag modes timed alternately in one process, several rounds (v23): the whole forward
(graph replay, synchronised calls as bench_persistent) and the kernel alone per round, after a
warm-up round that is not kept. The A/B benches time each mode once per row, and the first mode of
a process measured slower in v23's visits (warm-up), which alternation spreads over both modes.

    python benchmarks/ab_alternate.py OUT_DIR MODULE [--rounds N] [--repeats N] [--name NAME]
MODULE: a bench module with ROWS and MODES (two modes; e.g. bench_persistent_v23), or ALTERNATE_MODES (any number).
Writes OUT_DIR/NAME.{json,md} (NAME: ab_alternate) and prints the table.
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
import bench_persistent as bp  # noqa: E402


def alternate(cell, modes: dict, rounds: int, repeats: int) -> dict:
    """{mode: {"fwd": [µs/step per round], "kernel": [...]}} of ``cell`` (the first round dropped)."""
    problem = bp._problem(*cell, seed=cell[1] + cell[2])

    def measure():
        t = ab_modes.time_mode(*problem, repeats, train=False)
        return {"fwd": t["graph_fwd_us"], "kernel": t["kernel_us"]}
    return ab_modes.alternate_rounds(modes, rounds, measure)


def markdown(rows, modes) -> str:
    head = " | ".join([f"fwd µs/step {modes[0]} (median, rounds)"] + list(modes[1:])
                      + [f"kernel {modes[0]}"] + list(modes[1:]))
    lines = [f"| dtype | H | B | {head} |", "|---|---|---|" + "---|" * (2 * len(modes))]
    for r in rows:
        cells = []
        for key in ("fwd", "kernel"):
            for m in modes:
                v = r[m][key]
                cells.append(f"{np.median(v):.3f} ({', '.join(f'{x:.2f}' for x in v)})")
        lines.append(f"| {r['dtype']} | {r['hidden']} | {r['batch']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    args, out = bp.bench_args(argv, repeats=20, configure=lambda p: (
        p.add_argument("module"), p.add_argument("--rounds", type=int, default=4),
        p.add_argument("--rows", type=int, default=None), p.add_argument("--name", default="ab_alternate")))
    module = importlib.import_module(args.module)
    modes = getattr(module, "ALTERNATE_MODES", module.MODES)   # v30: a module may alternate more than two
    rows = []
    for cell in module.ROWS[:args.rows]:
        rows.append({"dtype": cell[0], "hidden": cell[1], "batch": cell[2], **alternate(cell, modes, args.rounds, args.repeats)})
        bp.save_rows(out, args.name, bp.bench_meta(), rows, markdown(rows, list(modes)))
    print(markdown(rows, list(modes)))


if __name__ == "__main__":
    main()
