"""v11 benchmark of the tensor-core kernels against cuDNN in the same process (torch.nn.LSTM, PyTorch
defaults). Per row (T=256, 1 layer, input=hidden, random non-zero inputs, CUDA events, median): the
forward kernel alone with the tagged exchange and grid.sync(), each with the v11 pointwise thread
order (units fastest) and the old one (UNITS_FASTEST=0, the ablation); the whole forward (graph
replay) and fwd+bwd ms with the default plans, with either thread order; cuDNN's forward µs/step and
fwd+bwd ms.

    python benchmarks/bench_persistent_v11.py OUT_DIR [--repeats N] [--rows N] [--name NAME] [--old-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v11_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import (STEPS, _median_ms, _problem, ab_bench_main, ab_table, cudnn_ratios, fmt,  # noqa: E402
                             kernel_launcher, measured_row)
from bench_persistent_v5 import _train_ms  # noqa: E402

from ecornn.engines import persistent  # noqa: E402

ROWS = [("float16", 1024, 8), ("float16", 1024, 16), ("bfloat16", 1024, 4), ("bfloat16", 2048, 4),
        ("bfloat16", 512, 8), ("float16", 1024, 1)]
EXCHANGES = [("tagged", True), ("grid_sync", False)]


def measure(dtype, hidden, batch, repeats, old_first=False):
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    plans = persistent.plans_for(config, True)
    out = {"default": {k: "tagged" if p.tagged else "grid_sync" for k, p in plans.items()}}
    for order in ("old", "new") if old_first else ("new", "old"):
        persistent.UNITS_FASTEST = order == "new"
        suffix = "" if order == "new" else "_old_order"
        try:
            plans = persistent.plans_for(config, True)       # this order's plans (and kernels)
            prepared = persistent.prepare(config, weights)   # graphs captured with this order's kernels
            for name, tagged in EXCHANGES:
                launch = kernel_launcher(config, prepared, x, h0, c0, plans["forward"].with_exchange(tagged))
                out[f"kernel_{name}{suffix}_us"] = _median_ms(launch, repeats) * 1e3 / STEPS
            fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
            out[f"graph_fwd{suffix}_us"] = _median_ms(fwd, repeats) * 1e3 / STEPS
            out[f"train{suffix}_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats)
        finally:
            persistent.UNITS_FASTEST = True
    return out


def row(dtype, hidden, batch, repeats, old_first=False):
    return measured_row(measure, dtype, hidden, batch, repeats, old_first)


def markdown(rows):
    head = ("| dtype | H | B | default fwd/bwd | fwd µs/step | old order | target | kernel tagged | old order | "
            "kernel grid.sync | old order | cuDNN fwd | fwd+bwd ms | old order | cuDNN fwd+bwd | fwd vs cuDNN | "
            "fwd+bwd vs cuDNN |")

    def cells(r):
        g, t = r.get("graph_fwd_us"), r.get("train_ms")
        return ["/".join(r["default"].values()), fmt(g), fmt(r.get("graph_fwd_old_order_us")),
                fmt(r.get("target_us"), ".1f"), fmt(r.get("kernel_tagged_us")), fmt(r.get("kernel_tagged_old_order_us")),
                fmt(r.get("kernel_grid_sync_us")), fmt(r.get("kernel_grid_sync_old_order_us")), fmt(r.get("cudnn_us")),
                fmt(t), fmt(r.get("train_old_order_ms")), fmt(r.get("cudnn_train_ms"))] + cudnn_ratios(r, g, t)
    return ab_table(rows, head, cells, lead=("dtype", "hidden", "batch"))


def main(argv=None):
    ab_bench_main(argv, ROWS, row, markdown, "persistent_v11_bench", "--old-first", "time the old thread order first (order bias check)")


if __name__ == "__main__":
    main()
