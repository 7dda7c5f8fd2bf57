"""v35 diagnostic: does the forward kernel's time (kernel alone, µs/step) depend on where its exchange buffer
(and, for a GEMM-fed kernel, its xw) lies in device memory? The kernel alone reads 1.8-2.3 µs/step at fp32 H=1024
B=4 from one fresh set of prepared weights to the next (v34, v35 A/B tables); placement is one candidate.

Per cell, one prepared set and one launcher (bench_persistent.kernel_launcher), then rounds over placements
(order reversed every other round): the exchange buffer (the engine's zeroed words) at byte offsets of one
256 MB allocation, and xw copied to offsets of another.

    python benchmarks/diag_placement_v35.py OUT_DIR [--rounds N] [--repeats N]
Writes OUT_DIR/diag_placement_v35.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _median_ms, _problem, bench_args, bench_meta, kernel_launcher, save_rows  # noqa: E402

CELLS = [("float32", 1024, 4), ("bfloat16", 1024, 4), ("float32", 1024, 8)]
MB = 1 << 20
XCH_OFFSETS = [0, 16 << 10, 64 << 10, 256 << 10, 1 * MB, 3 * MB, 8 * MB, 33 * MB, 100 * MB]
XW_OFFSETS = [0, 1 * MB, 5 * MB, 32 * MB, 100 * MB]


class _PlacedZeros:
    """cupy, except zeros(): zeroed views at a chosen byte offset of one allocation."""

    def __init__(self, cp, size_bytes):
        self._cp, self.offset = cp, 0
        self.room = cp.zeros(size_bytes // 4, cp.uint32)

    def zeros(self, n, dtype):
        assert dtype == self._cp.uint32
        view = self.room[self.offset // 4:self.offset // 4 + n]
        view.fill(0)
        return view

    def __getattr__(self, name):
        return getattr(self._cp, name)


def measure_cell(dtype, hidden, batch, rounds, repeats):
    import cupy as cp
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    plan = persistent._final(persistent.plans_for(config, False)["forward"])
    xw_room = cp.zeros(256 * MB // 4, cp.float32)
    placed_xw = {}
    original_projections = persistent._input_projections

    def projections_at(offset):
        def placed(*args, **kwargs):
            xw = original_projections(*args, **kwargs)
            view = xw_room[offset // 4:offset // 4 + xw.size].reshape(xw.shape)
            view[...] = xw
            return view
        return placed
    for offset in XW_OFFSETS:   # one launcher per xw placement (the launcher computes xw once)
        persistent._input_projections = projections_at(offset)
        try:
            placed_xw[offset] = kernel_launcher(config, prepared, x, h0, c0, plan)
        finally:
            persistent._input_projections = original_projections
    placed = _PlacedZeros(cp, 256 * MB)
    original_cp = persistent._cp
    persistent._cp = lambda: placed
    times = {("xch", o): [] for o in XCH_OFFSETS}
    times.update({("xw", o): [] for o in XW_OFFSETS})
    try:
        for r in range(rounds + 1):
            order = [("xch", o) for o in XCH_OFFSETS] + [("xw", o) for o in XW_OFFSETS]
            for kind, offset in (order if r % 2 == 0 else order[::-1]):
                placed.offset = offset if kind == "xch" else 0
                launch = placed_xw[offset if kind == "xw" else 0]
                us = _median_ms(launch, repeats) * 1e3 / STEPS
                if r:
                    times[(kind, offset)].append(us)
    finally:
        persistent._cp = original_cp
    return {"dtype": dtype, "hidden": hidden, "batch": batch, "plan": plan.describe(),
            "rows": [{"what": k, "offset_bytes": o, "us_per_step": v} for (k, o), v in times.items()]}


def markdown(cells) -> str:
    lines = []
    for c in cells:
        lines += [f"**{c['dtype']} H={c['hidden']} B={c['batch']}** (`{c['plan']}`)", "",
                  "| placed | offset | kernel µs/step (median; rounds) |", "|---|---|---|"]
        for r in c["rows"]:
            v = r["us_per_step"]
            lines.append(f"| {r['what']} | {r['offset_bytes']} | {np.median(v):.3f} ({', '.join(f'{t:.2f}' for t in v)}) |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    args, out = bench_args(argv, repeats=10, configure=lambda p: p.add_argument("--rounds", type=int, default=4))
    cells = []
    for cell in CELLS:
        cells.append(measure_cell(*cell, args.rounds, args.repeats))
        save_rows(out, "diag_placement_v35", bench_meta(), cells, markdown(cells))
    print(markdown(cells))


if __name__ == "__main__":
    main()
