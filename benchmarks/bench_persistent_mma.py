"""Benchmark of the `persistent` v4 tensor-core kernel (fp16/bf16) against the widened fp32 grid
kernel and torch.nn.LSTM (cuDNN, PyTorch defaults, fp16/bf16 module) in the same process.

T=256, 1 layer, input=hidden, fresh random non-zero inputs, CUDA events, median of repeats.
Per row: forward µs/step (whole forward and kernel only) and forward+backward ms for the mma (and,
on the issue's target rows or with --all-grid, the widened grid) variant, cuDNN forward µs/step
and forward+backward ms, the issue's target. Target rows run first (the device visit has a budget).

    python benchmarks/bench_persistent_mma.py OUT_DIR [--repeats N] [--quick]
Writes OUT_DIR/persistent_mma_bench.json and OUT_DIR/persistent_mma_bench.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import (STEPS, TARGETS, _median_ms, _problem, _recurrence_ms, add_cudnn, bench_meta,  # noqa: E402
                             fmt, save_rows)

CONFIGS = [(1024, 1), (1024, 4), (1024, 8), (1024, 16), (2048, 4), (512, 4)]
GRID_ROWS = {("float16", 1024, 8), ("bfloat16", 1024, 4), ("float16", 1024, 16), ("bfloat16", 2048, 4)}
TRAIN_TARGET_VS_CUDNN = 1.2   # fwd+bwd speed-up over cuDNN's persistent fp16 at H=1024, B in {8, 16}


def variant_times(dtype, hidden, batch, variant, repeats):
    """Forward µs/step (whole, kernel only), fwd+bwd ms (or the error) and kernel reports."""
    import cupy as cp
    from ecornn import NotSupported
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    out = {}
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared, variant=variant)  # noqa: E731
    out["fwd_us"] = _median_ms(fwd, repeats) * 1e3 / STEPS
    out["kind"] = persistent.last_kinds.get("forward")
    plan = persistent.plans_for(config, False, variant)["forward"]
    out["kernel_us"] = _recurrence_ms(config, prepared, x, h0, c0, plan) * 1e3 / STEPS
    out["forward_kernel"] = persistent.kernel_report(plan)
    dy = cp.asarray(np.random.default_rng(1).standard_normal(config.output_shape, dtype=np.float32)).astype(x.dtype)
    zeros = cp.zeros(config.state_shape, x.dtype)

    def train():
        res = persistent.forward(config, x, weights, h0, c0, training=True, prepared=prepared, variant=variant)
        persistent.backward(res[3], dy, zeros, zeros)
    try:
        out["train_ms"] = _median_ms(train, max(5, repeats // 2))
        out["backward_kernel"] = persistent.kernel_report(persistent.plans_for(config, True, variant)["backward"])
    except NotSupported as exc:
        out["train_error"] = str(exc)
    return out


def row(dtype, hidden, batch, repeats, with_grid=True):
    entry = {"dtype": dtype, "hidden": hidden, "batch": batch, "steps": STEPS,
             "target_us": TARGETS.get((dtype, hidden, batch))}
    for variant in ("mma", "grid") if with_grid else ("mma",):
        try:
            entry[variant] = variant_times(dtype, hidden, batch, variant, repeats)
        except Exception as exc:  # NotSupported or a failure: recorded, never hidden
            entry[variant] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    return add_cudnn(entry, dtype, hidden, batch, repeats)


def markdown(rows):
    head = ("| dtype | H | B | mma fwd µs/step | mma kernel | target | grid fwd | grid kernel | cuDNN fwd | "
            "mma fwd+bwd ms | grid fwd+bwd | cuDNN fwd+bwd | train vs cuDNN | mma regs fwd/bwd |")
    lines = [head, "|" + "---|" * 14]
    for r in rows:
        m, g = r.get("mma", {}), r.get("grid", {})
        speed = r["cudnn_train_ms"] / m["train_ms"] if "train_ms" in m and "cudnn_train_ms" in r else None
        regs = f"{m.get('forward_kernel', {}).get('registers', '-')}/{m.get('backward_kernel', {}).get('registers', '-')}"
        lines.append(f"| {r['dtype']} | {r['hidden']} | {r['batch']} | {fmt(m.get('fwd_us'))} | {fmt(m.get('kernel_us'))} | "
                     f"{fmt(r.get('target_us'), '.1f')} | {fmt(g.get('fwd_us'))} | {fmt(g.get('kernel_us'))} | "
                     f"{fmt(r.get('cudnn_us'))} | {fmt(m.get('train_ms'))} | {fmt(g.get('train_ms'))} | "
                     f"{fmt(r.get('cudnn_train_ms'))} | {fmt(speed)}x | {regs} |")
        for name, v in (("mma", m), ("grid", g)):
            for key in ("error", "train_error"):
                if key in v:
                    lines.append(f"|  | | | {name} {key}: {v[key][:160]} |||||||||||")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="fp16 H=1024 B=8 and bf16 H=2048 B=4 only")
    parser.add_argument("--all-grid", action="store_true", help="time the grid variant on every row (default: "
                                                                   "the issue's target rows; each is 2 more builds)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = bench_meta()
    cases = ([("float16", 1024, 8), ("bfloat16", 2048, 4)] if args.quick else
             [(d, h, b) for d in ("float16", "bfloat16") for h, b in CONFIGS])
    cases.sort(key=lambda c: c not in TARGETS)              # the issue's target rows first
    rows = []
    for dtype, hidden, batch in cases:
        with_grid = args.all_grid or (dtype, hidden, batch) in GRID_ROWS
        rows.append(row(dtype, hidden, batch, args.repeats, with_grid))
        print(markdown(rows[-1:]).splitlines()[2], flush=True)
        save_rows(out, "persistent_mma_bench", meta, rows, markdown(rows))   # after every row: a timeout keeps what was measured
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
