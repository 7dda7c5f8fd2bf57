"""v39 exploration: the 16-bit passes with the batch as more than two groups (persistent.BATCH_GROUPS = G, an int:
G groups of B/G columns, each on 1/G of the SMs, wherever they fit) against the engine's choice ("auto": v30's two
groups in call 4's set 1, v39's rule in call 5's set 2). Per cell and mode, alternated in one process: the forward kernel alone, the whole forward
(graph replay) and fwd+bwd, T=256, input = hidden.

    python benchmarks/explore_groups_v39.py OUT_DIR [--rounds N] [--repeats N] [--set 1|2]
Writes OUT_DIR/explore_groups_v39.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent import _problem, bench_args, bench_meta, save_rows  # noqa: E402

# (dtype, hidden, batch, groups to try besides "auto"), per --set: 1 (call 4, "auto" was v30's two groups), 2 (call 5,
# "auto" is v39's rule, 2 is v38's choice)
CELL_SETS = {
    1: [("float16", 256, 32, (4,)), ("float16", 512, 32, (4,)), ("float16", 256, 64, (4, 8)),
        ("bfloat16", 512, 64, (4, 8)), ("float16", 768, 32, (4,)), ("float16", 256, 128, (4, 8, 16))],
    2: [("float16", 1024, 24, (2,)), ("float16", 1024, 32, (2,)), ("bfloat16", 512, 32, (2,)),
        ("float16", 512, 64, (2,)), ("bfloat16", 256, 48, (2,)), ("float16", 512, 48, (2,)),
        ("bfloat16", 384, 64, (2,)), ("float16", 128, 128, (2,))]}


def measure_cell(dtype, hidden, batch, groups, rounds, repeats, train=True) -> dict:
    """Per mode ("auto" and G groups): whole forward, kernel and (``train``) fwd+bwd, alternated."""
    modes = {"auto": {}, **{f"G={g}": {"BATCH_GROUPS": g} for g in groups}}
    return measure_modes_cell(dtype, hidden, batch, modes, rounds, repeats, train)


def measure_modes_cell(dtype, hidden, batch, modes, rounds, repeats, train=True, usable=ab_modes.plannable_modes) -> dict:
    """Per mode of ``modes`` (name -> engine flags) that ``usable`` keeps (default: the ones that plan): whole forward,
    kernel and (``train``) fwd+bwd, alternated; the others' errors."""
    problem = _problem(dtype, hidden, batch, seed=hidden + batch)
    usable, errors = usable(problem[0], modes, train)

    def measure():
        t = ab_modes.time_mode(*problem, repeats, train=train)
        return {"fwd": t["graph_fwd_us"], "kernel": t["kernel_us"], "train": t.get("train_ms", float("nan")),
                "plan": t["plan"]}
    runs = ab_modes.alternate_rounds(usable, rounds, measure)
    return {"dtype": dtype, "hidden": hidden, "batch": batch, "errors": errors,
            "modes": {m: {k: (v if k == "plan" else [float(x) for x in v]) for k, v in r.items()} for m, r in runs.items()}}


def markdown(rows) -> str:
    lines = ["| cell | mode | whole forward µs/step | kernel | fwd+bwd ms | forward plan |", "|---|---|---|---|---|---|"]
    for r in rows:
        for mode, m in r["modes"].items():
            lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {mode} | {np.median(m['fwd']):.2f} | "
                         f"{np.median(m['kernel']):.2f} | {np.median(m['train']):.3f} | {m['plan'][0][:110]} |")
        for mode, err in r["errors"].items():
            lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {mode} | {err} | | | |")
    return "\n".join(lines) + "\n\nMedians over the kept rounds (modes alternated, a warm-up round dropped).\n"


def main(argv=None):
    run(CELL_SETS, "explore_groups_v39", argv)


def run(cell_sets: dict, name: str, argv=None, measure=None):
    """Measure the cells of --set (a key of ``cell_sets``) by ``measure`` (default measure_cell: its 4th item the
    group counts), saving OUT_DIR/``name``.{json,md} after each."""
    measure = measure or measure_cell
    def configure(parser):
        parser.add_argument("--rounds", type=int, default=2)
        parser.add_argument("--set", type=int, choices=sorted(cell_sets), default=max(cell_sets))
    args, out = bench_args(argv, repeats=10, configure=configure)
    meta, rows = bench_meta(), []
    for dtype, hidden, batch, groups, *train in cell_sets[args.set]:   # an optional 5th item: train (default True)
        try:
            rows.append(measure(dtype, hidden, batch, groups, args.rounds, args.repeats, *train))
        except Exception as exc:   # one cell's failure must not lose the others
            rows.append({"dtype": dtype, "hidden": hidden, "batch": batch, "modes": {},
                         "errors": {"cell": f"{type(exc).__name__}: {str(exc)[:300]}"}})
        print(rows[-1], flush=True)
        save_rows(out, name, meta, rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
