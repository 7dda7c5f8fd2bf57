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

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _median_ms, _problem, bench_meta, fmt, kernel_launcher, measured_row, save_rows  # noqa: E402
from bench_persistent_v5 import _train_ms  # noqa: E402

from ecornn.engines import persistent, persistent_capacity as capacity  # noqa: E402

ROWS = [("float16", 1024, 8), ("float16", 1024, 16), ("bfloat16", 1024, 4), ("bfloat16", 2048, 4),
        ("bfloat16", 512, 8), ("float16", 1024, 1)]
EXCHANGES = [("tagged", True), ("grid_sync", False)]
_defines, _kernels = capacity.MmaPlan.defines, persistent._kernel


def _old_order(enabled: bool) -> None:
    """Build the tensor-core kernels with the v10 pointwise thread order (ablation; a kernel cache of
    its own, as the plans are the same) or the v11 one."""
    capacity.MmaPlan.defines = (lambda plan: {**_defines(plan), "UNITS_FASTEST": 0}) if enabled else _defines
    persistent._kernel = persistent._remembered(_kernels.__wrapped__) if enabled else _kernels


def measure(dtype, hidden, batch, repeats, old_first=False):
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    plans = persistent.plans_for(config, True)
    out = {"default": {k: "tagged" if p.tagged else "grid_sync" for k, p in plans.items()}}
    for order in ("old", "new") if old_first else ("new", "old"):
        _old_order(order == "old")
        suffix = "" if order == "new" else "_old_order"
        try:
            prepared = persistent.prepare(config, weights)   # graphs captured with this order's kernels
            for name, tagged in EXCHANGES:
                launch = kernel_launcher(config, prepared, x, h0, c0, plans["forward"].with_exchange(tagged))
                out[f"kernel_{name}{suffix}_us"] = _median_ms(launch, repeats) * 1e3 / STEPS
            fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
            out[f"graph_fwd{suffix}_us"] = _median_ms(fwd, repeats) * 1e3 / STEPS
            out[f"train{suffix}_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats)
        finally:
            _old_order(False)
    return out


def row(dtype, hidden, batch, repeats, old_first=False):
    return measured_row(measure, dtype, hidden, batch, repeats, old_first)


def markdown(rows):
    head = ("| dtype | H | B | default fwd/bwd | fwd µs/step | old order | target | kernel tagged | old order | "
            "kernel grid.sync | old order | cuDNN fwd | fwd+bwd ms | old order | cuDNN fwd+bwd | fwd vs cuDNN | "
            "fwd+bwd vs cuDNN |")
    lines = [head, "|" + "---|" * 17]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['dtype']} | {r['hidden']} | {r['batch']} | error: {r['error'][:200]} |")
            continue
        g, c, t, ct = r.get("graph_fwd_us"), r.get("cudnn_us"), r.get("train_ms"), r.get("cudnn_train_ms")
        cells = [r["dtype"], str(r["hidden"]), str(r["batch"]), "/".join(r["default"].values()), fmt(g),
                 fmt(r.get("graph_fwd_old_order_us")), fmt(r.get("target_us"), ".1f"),
                 fmt(r.get("kernel_tagged_us")), fmt(r.get("kernel_tagged_old_order_us")),
                 fmt(r.get("kernel_grid_sync_us")), fmt(r.get("kernel_grid_sync_old_order_us")), fmt(c), fmt(t),
                 fmt(r.get("train_old_order_ms")), fmt(ct), fmt(c / g if c and g else None) + "x",
                 fmt(ct / t if ct and t else None) + "x"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rows", type=int, default=len(ROWS))
    parser.add_argument("--name", default="persistent_v11_bench")
    parser.add_argument("--old-first", action="store_true", help="time the old thread order first (order bias check)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = bench_meta()
    rows = []
    for dtype, hidden, batch in ROWS[:args.rows]:
        rows.append(row(dtype, hidden, batch, args.repeats, args.old_first))
        save_rows(out, args.name, meta, rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
