"""v39 diagnostic: do the same blocks publish late step after step? From v37's step clocks (the global timer at each
block's published h), per cell and engine mode: the Spearman correlation of the blocks' publish ranks between
steps s and s+1 (and s+2), the spread of the publishes, and how long a block waits from its own publish to its
median warp's staged vector of the next step, for the earliest and the latest quarter of publishers. A constant
first-poll delay suits a block that publishes early; an adaptive one (v39's ADAPTIVE_POLL_DELAY, removed) could only
follow blocks whose lateness persists. The phases of each mode's record are v37's (diag_step_clocks_v37.phases); the records
are saved as .npz for later reading.

    python benchmarks/diag_publish_order_v39.py OUT_DIR [--cells float32:1024:4 ...] [--modes v38 ...]
Writes OUT_DIR/diag_publish_order_v39.{json,md} and OUT_DIR/records_v39/*.npz.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent import _problem, bench_args, bench_meta, kernel_launcher, save_rows  # noqa: E402
from diag_step_clocks_v37 import (MARKED_STEPS, SKIP_STEPS, THREAD_MARKS, _record, _since, parse_cell,  # noqa: E402
                                  phases)

CELLS = [("float32", 1024, 4), ("float16", 1024, 1), ("float16", 1024, 16)]
MODES = {"v38": {}}   # engine-flag modes (ab_modes.set_engine_flags); calls 1-3 also ran v39's removed options
PUBLISHED_NS = THREAD_MARKS.index("published_ns")


def _ranks(values: np.ndarray) -> np.ndarray:
    """Ranks (0 = smallest) along axis 0."""
    return np.argsort(np.argsort(values, axis=0, kind="stable"), axis=0, kind="stable")


def publish_order(record: np.ndarray, warps: int, skip: int = SKIP_STEPS) -> dict:
    """Rank persistence and waits of a record [blocks][steps][slots] (see the module docstring)."""
    rec = np.asarray(record, np.int64)
    blocks, steps, _ = rec.shape
    if steps - skip < 4:
        raise ValueError(f"record: expected more than {skip + 3} steps, got {steps}")
    pub = rec[:, skip:steps - 1, PUBLISHED_NS]
    rel = _since(pub, pub.min(axis=0)[None, :])            # ns after the step's first publish
    ranks = _ranks(rel).astype(float)
    corr = lambda a, b: float(np.mean([np.corrcoef(a[:, i], b[:, i])[0, 1] for i in range(a.shape[1])]))  # noqa: E731
    t = len(THREAD_MARKS)
    staged_next = np.median(rec[:, skip + 1:steps, t + 2 * warps:], axis=2)   # step s+1's median warp staged
    own_wait = _since(staged_next, pub)                                        # own publish of s -> staged s+1
    quarter = max(1, blocks // 4)
    order = np.argsort(rel, axis=0)
    early = np.take_along_axis(own_wait, order[:quarter], axis=0)
    late = np.take_along_axis(own_wait, order[-quarter:], axis=0)
    return {"rank_corr_next": corr(ranks[:, :-1], ranks[:, 1:]), "rank_corr_two": corr(ranks[:, :-2], ranks[:, 2:]),
            "spread_ns": float(np.median(rel.max(axis=0))),
            "own_wait_early_quarter_ns": float(np.median(early)), "own_wait_late_quarter_ns": float(np.median(late)),
            "last_block_same_next": float(np.mean(order[-1, :-1] == order[-1, 1:]))}


def measure(cell, mode: str, out: Path) -> dict:
    from ecornn.engines import persistent
    import cupy as cp
    ab_modes.set_engine_flags(MODES[mode])
    try:
        config, weights, x, h0, c0 = _problem(*cell, seed=cell[1] + cell[2])
        prepared = persistent.prepare(config, weights)
        plan = persistent.plans_for(config, False)["forward"]
        persistent.STEP_CLOCKS = MARKED_STEPS
        launch = kernel_launcher(config, prepared, x, h0, c0, plan)
        for _ in range(3):   # warm: the record of the last launch is read
            launch()
        cp.cuda.Device().synchronize()
        record, final = _record(plan, persistent._final(plan).grid)
    finally:
        persistent.STEP_CLOCKS = 0
        ab_modes.set_engine_flags({})
    folder = out / "records_v39"
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{cell[0]}_H{cell[1]}_B{cell[2]}_{mode.replace(' ', '_').replace('/', '-')}"
    np.savez_compressed(folder / f"{name}.npz", record=record, warps=final.warps)
    row = {"dtype": cell[0], "hidden": cell[1], "batch": cell[2], "mode": mode, "plan": final.describe()}
    row.update(publish_order(record, final.warps))
    row["phases_ns"] = phases(record, final.warps)["ns"]
    return row


def markdown(rows) -> str:
    lines = ["| cell | mode | rank corr s→s+1 | s→s+2 | last block again | spread | own publish → staged, early / late "
             "quarter | step | last publish → staged |", "|" + "---|" * 8]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {r.get('mode')} | {r['error']} |" + " |" * 5)
            continue
        n = r["phases_ns"]
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {r['mode']} | {r['rank_corr_next']:.2f} | "
                     f"{r['rank_corr_two']:.2f} | {r['last_block_same_next']:.2f} | {r['spread_ns']:.0f} | "
                     f"{r['own_wait_early_quarter_ns']:.0f} / {r['own_wait_late_quarter_ns']:.0f} | {n['step']:.0f} | "
                     f"{n['last_publish_to_staged']:.0f} |")
    return "\n".join(lines) + "\n\nns; medians over the recorded steps (v37's step clocks, one marked launch per row).\n"


def main(argv=None):
    def configure(parser):
        parser.add_argument("--cells", nargs="+", type=parse_cell, default=CELLS, help="dtype:hidden:batch ...")
        parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    args, out = bench_args(argv, repeats=10, configure=configure)
    meta, rows = bench_meta(), []
    for cell in args.cells:
        for mode in args.modes:
            try:
                rows.append(measure(cell, mode, out))
            except Exception as exc:   # one cell's failure must not lose the others
                rows.append({"dtype": cell[0], "hidden": cell[1], "batch": cell[2], "mode": mode,
                             "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
            print(rows[-1], flush=True)
            save_rows(out, "diag_publish_order_v39", meta, rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
