"""v48 diagnostic: does a forward kernel's time depend on where its buffers lie? The kernel-alone rounds of the
fp32 H=1024 B=8 forward read 2.38 or 2.73 µs/step (v48's call 1; v34/v35 saw bimodal rounds too), and each
round allocates afresh. Two experiments per cell, the kernel launched alone (bench_persistent.kernel_launcher):

- "exchange": the kernel's zeroed exchange buffer (persistent._launch's cp.zeros) taken from K fixed places of
  one large allocation, each place visited in several shuffled passes;
- "operands": K launchers (fresh xw, y, states), the exchange at one fixed place, visited likewise.

If a place's time repeats over passes and places differ, the address decides. Per place: µs/step per pass.

    python benchmarks/diag_buffer_address_v48.py OUT_DIR [--places K] [--passes N] [--repeats N]
Writes OUT_DIR/diag_buffer_address_v48.{json,md}.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _median_ms, _problem, bench_meta, kernel_launcher  # noqa: E402

CELLS = [("float32", 1024, 8), ("float32", 1024, 4), ("float16", 1024, 16), ("bfloat16", 1024, 4)]


class ExchangePlaces:
    """cupy.zeros of the exchange's uint32 size returns the current place (zeroed) instead of a pool block."""

    def __init__(self, cp, words: int, places: int, rng):
        self.cp, self.words, self.real = cp, words, cp.zeros
        self.arena = cp.empty(64 * 2 ** 20 // 4 + places * words, cp.uint32)   # 64 MB of room for the offsets
        room = self.arena.size - words
        starts = sorted(rng.choice(room // 32, places, replace=False) * 32)   # 128-byte aligned
        self.starts = [int(s) for s in starts]
        self.current = 0

    def zeros(self, shape, dtype=float, *args, **kwargs):
        size = int(np.prod(shape))
        if np.dtype(dtype) == np.uint32 and size == self.words:
            view = self.arena[self.starts[self.current]:self.starts[self.current] + size]
            view.fill(0)
            return view.reshape(shape)
        return self.real(shape, dtype, *args, **kwargs)


def _exchange_words(cp, launcher) -> int:
    """The uint32 size the launch zeroes (the first cp.zeros of that dtype)."""
    sizes, real = [], cp.zeros

    def spy(shape, dtype=float, *a, **k):
        if np.dtype(dtype) == np.uint32:
            sizes.append(int(np.prod(shape)))
        return real(shape, dtype, *a, **k)
    cp.zeros = spy
    try:
        launcher()
    finally:
        cp.zeros = real
    cp.cuda.Device().synchronize()
    return sizes[0]


def _passes(labels, passes, rng, time_one) -> dict:
    """{label: [µs/step per pass]}, every pass in a new shuffled order."""
    out = {label: [] for label in labels}
    for _ in range(passes):
        for label in rng.permutation(len(labels)):
            out[labels[label]].append(time_one(labels[label]))
    return out


def cell_row(dtype, hidden, batch, places, passes, repeats, rng) -> dict:
    import cupy as cp
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    plan = persistent._final(persistent.plans_for(config, False)["forward"])
    launcher = kernel_launcher(config, prepared, x, h0, c0, plan)
    words = _exchange_words(cp, launcher)
    where = ExchangePlaces(cp, words, places, rng)
    us = lambda fn: _median_ms(fn, repeats) * 1e3 / STEPS  # noqa: E731
    cp.zeros = where.zeros
    try:
        def exchange_at(label):
            where.current = label
            return us(launcher)
        exchange = _passes(list(range(places)), passes, rng, exchange_at)
        launchers = [kernel_launcher(config, prepared, x, h0, c0, plan) for _ in range(places)]   # all alive
        where.current = 0

        def operands_of(label):
            return us(launchers[label])
        operands = _passes(list(range(places)), passes, rng, operands_of)
    finally:
        cp.zeros = where.real
    return {"dtype": dtype, "hidden": hidden, "batch": batch, "plan": plan.describe(), "exchange_words": words,
            "exchange_offsets_bytes": [4 * s for s in where.starts],
            "exchange": {str(k): v for k, v in exchange.items()}, "operands": {str(k): v for k, v in operands.items()}}


def _consistency(table: dict) -> str:
    """Medians per place, and how much of the spread is between places: the correlation of pass 1 and 2."""
    runs = np.array(list(table.values()))
    medians = np.median(runs, axis=1)
    corr = float(np.corrcoef(runs[:, 0], runs[:, 1])[0, 1]) if runs.shape[1] > 1 and runs[:, 0].std() > 0 else 0.0
    return (f"places' medians {medians.min():.2f}–{medians.max():.2f} µs/step; every run {runs.min():.2f}–"
            f"{runs.max():.2f}; pass 1 vs 2 correlation {corr:+.2f}")


def markdown(rows) -> str:
    lines = []
    for r in rows:
        if "error" in r:
            lines += [f"**{r['dtype']} H={r['hidden']} B={r['batch']}**: {r['error']}", ""]
            continue
        lines += [f"**{r['dtype']} H={r['hidden']} B={r['batch']}** ({r['plan']})", ""]
        for name in ("exchange", "operands"):
            lines.append(f"- {name}: {_consistency(r[name])}")
            lines += [f"  - place {k}: " + ", ".join(f"{v:.2f}" for v in vals) for k, vals in r[name].items()]
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--places", type=int, default=10)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(48)
    rows = []
    for cell in CELLS:
        try:
            rows.append(cell_row(*cell, args.places, args.passes, args.repeats, rng))
        except Exception as exc:  # noqa: BLE001 - recorded, never hidden
            rows.append({"dtype": cell[0], "hidden": cell[1], "batch": cell[2],
                         "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
        print(markdown(rows[-1:]), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "diag_buffer_address_v48.json").write_text(json.dumps({"meta": bench_meta(), "rows": rows}, indent=1))
    (out / "diag_buffer_address_v48.md").write_text(json.dumps(bench_meta()) + "\n\n" + markdown(rows))


if __name__ == "__main__":
    main()
