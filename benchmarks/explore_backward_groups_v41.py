"""v41 exploration: the fp32 grid backward (FFMA, kernels/persistent_lstm.cu) with its batch in groups on blocks of
their own (persistent.BACKWARD_GROUPS = G: G groups of B/G columns, each on 1/G of the SMs, where they fit) against
no groups (False: the ungrouped grid backward, or the rows backward where rules.rows_backward_pays or only it fits)
and the engine's choice ("auto"). Per cell and mode, alternated in one process: fwd+bwd ms, T=256, input = hidden
(the forward is the same plan in every mode, so the differences are the backward's).

    python benchmarks/explore_backward_groups_v41.py OUT_DIR [--rounds N] [--repeats N] [--set 1|2]
Writes OUT_DIR/explore_backward_groups_v41.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent import _problem, bench_args, bench_meta, save_rows  # noqa: E402
from bench_persistent_v5 import _train_ms  # noqa: E402

# (hidden, batch, group counts to try besides none and "auto"[, engine flags of the grouped modes]), per --set
ROWS_OFF = {"BACKWARD_BY_ROWS": False}   # the grouped grid backward where rules.rows_backward_pays would take rows
CELL_SETS = {
    1: [(256, 16, (2, 4, 8)), (512, 16, (2, 4, 8)), (256, 32, (2, 4, 8)), (512, 32, (2, 4, 8)),
        (256, 64, (2, 4, 8, 16)), (384, 32, (2, 4, 8)), (512, 8, (2, 4)), (256, 8, (2, 4)),
        (768, 16, (2, 4)), (768, 32, (2, 4)), (1024, 16, (2,)), (1024, 8, (2,)), (128, 64, (4, 8, 16)),
        (512, 4, (2,)), (1024, 4, (2,))],
    # 2: call 2, "auto" = groups of 2 columns first: against call 1's best counts, one-column groups, 32 groups,
    # new cells, and H=1024 grouped with the rows backward off
    2: [(256, 32, (8,)), (384, 32, (8,)), (768, 16, (2,)), (256, 16, (4, 16)), (256, 8, (8,)), (512, 4, (4,)),
        (256, 4, (2, 4)), (128, 16, (4, 8)), (384, 12, (3, 6)), (512, 24, (6, 12)), (128, 64, (16, 32)),
        (768, 8, (2, 4)), (1024, 16, (2, 4), ROWS_OFF), (1024, 8, (2, 4), ROWS_OFF), (1024, 4, (2,), ROWS_OFF)],
    # 3: call 3, "auto" with the engine's fallback to fewer groups (H=768 B=16: 4 spill, 2 built; H=512 B=24: 12 spill,
    # 6 built) and cells not measured before
    3: [(768, 16, (2,)), (512, 24, (6,)), (384, 16, (4, 8)), (640, 16, (2, 4)), (512, 48, (8, 16))],
}


def measure_cell(hidden, batch, counts, rounds, repeats, grouped_flags=None) -> dict:
    """Per mode (no groups, "auto", G groups with ``grouped_flags``): fwd+bwd ms and the built backward plan,
    alternated."""
    from ecornn.engines import persistent
    problem = _problem("float32", hidden, batch, seed=hidden + batch)
    modes = {"none": {"BACKWARD_GROUPS": False}, "auto": {},
             **{f"G={g}": {"BACKWARD_GROUPS": g, **(grouped_flags or {})} for g in counts}}
    usable, errors = ab_modes.plannable_modes(problem[0], modes, True)

    def measure():
        config, weights, x, h0, c0 = problem
        prepared = persistent.prepare(config, weights)
        train = _train_ms(config, weights, x, h0, c0, prepared, repeats)
        plan = persistent._final(persistent._built_plans(config, True, "auto")["backward"])   # after any fallback
        return {"train": train, "plan": plan.describe()}
    runs = ab_modes.alternate_rounds(usable, rounds, measure)
    return {"hidden": hidden, "batch": batch, "errors": errors,
            "modes": {m: {k: (v if k == "plan" else [float(x) for x in v]) for k, v in r.items()} for m, r in runs.items()}}


def markdown(rows) -> str:
    lines = ["| cell | mode | fwd+bwd ms | vs none | backward plan |", "|---|---|---|---|---|"]
    for r in rows:
        none = np.median(r["modes"]["none"]["train"]) if "none" in r["modes"] else float("nan")
        for mode, m in r["modes"].items():
            t = np.median(m["train"])
            lines.append(f"| fp32 H={r['hidden']} B={r['batch']} | {mode} | {t:.3f} | {none / t:.2f}x | "
                         f"{m['plan'][0][:150]} |")
        for mode, err in r["errors"].items():
            lines.append(f"| fp32 H={r['hidden']} B={r['batch']} | {mode} | {err} | | |")
    return "\n".join(lines) + "\n\nMedians over the kept rounds (modes alternated, a warm-up round dropped).\n"


def main(argv=None):
    def configure(parser):
        parser.add_argument("--rounds", type=int, default=2)
        parser.add_argument("--set", type=int, choices=sorted(CELL_SETS), default=max(CELL_SETS))
    args, out = bench_args(argv, repeats=10, configure=configure)
    meta, rows = bench_meta(), []
    for hidden, batch, counts, *flags in CELL_SETS[args.set]:
        try:
            rows.append(measure_cell(hidden, batch, counts, args.rounds, args.repeats, *flags))
        except Exception as exc:   # one cell's failure must not lose the others
            rows.append({"hidden": hidden, "batch": batch, "modes": {},
                         "errors": {"cell": f"{type(exc).__name__}: {str(exc)[:300]}"}})
        print(rows[-1], flush=True)
        save_rows(out, "explore_backward_groups_v41", meta, rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
