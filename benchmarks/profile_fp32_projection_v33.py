"""v33: where the fp32 whole forward's time goes outside the kernel (T=256, input = hidden, 1 layer).

Per fp32 row, GPU µs per call of each part issued back to back (profile_whole_call._gpu_us): the split
of x (gpu_blas.fp16_split3), the fp16-split GEMM left scaled, the same GEMM with its unscale pass (the
difference is the pass the kernels now skip), W_hh h0 (the split kernels' h0 argument), the kernel alone
(bench_persistent.kernel_launcher), and the whole forward by graph replay. "rest" = whole − kernel −
split − GEMM − W_hh h0: the replay's own cost (input copies, launches, gaps).

Caveat (call 2): parts whose GPU time is shorter than their host launch time (the split of x, W_hh h0) are
timed at the host's pace here, so "rest" came out negative; profile_replay_kernels_v33.py (CUPTI) times
every kernel of the replayed graph instead.

    python benchmarks/profile_fp32_projection_v33.py OUT_DIR [--repeats N]
Writes OUT_DIR/profile_fp32_projection_v33.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _problem, bench_args, bench_meta, fmt, kernel_launcher, measure_rows  # noqa: E402
from profile_whole_call import _gpu_us  # noqa: E402

ROWS = [("float32", 1024, 4), ("float32", 1024, 8), ("float32", 512, 4), ("float32", 1024, 1)]
PARTS = ("x_split", "gemm_scaled", "gemm_with_pass", "w_hh_h0", "kernel", "whole")


def profile(dtype, hidden, batch, repeats):
    import cupy as cp
    from ecornn import gpu_blas
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    plan = persistent._plans(config, training=False)["forward"]
    prep = prepared.slots[0]
    flat = x.reshape(STEPS * batch, hidden)
    split = gpu_blas.fp16_split3(flat, False)
    out = cp.empty((STEPS * batch, 4 * hidden), cp.float32)
    w3, w_exp = prep.input_weight_split16()
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    fwd(), fwd()   # eager, then the capture
    parts = {
        "x_split": lambda: gpu_blas.fp16_split3(flat, False),
        "gemm_scaled": lambda: gpu_blas.matmul_fp16_split3(*split, w3, w_exp, out, unscale=False),
        "gemm_with_pass": lambda: gpu_blas.matmul_fp16_split3(*split, w3, w_exp, out),
        "w_hh_h0": lambda: persistent._initial_recurrence(h0, prepared.slots[0:1]),
        "kernel": kernel_launcher(config, prepared, x, h0, c0, plan),
        "whole": fwd,
    }
    row = {"dtype": dtype, "hidden": hidden, "batch": batch, "kind": plan.kind, "split": persistent._is_split(persistent._final(plan)) if plan.kind == "mma" else False}
    row.update({f"{k}_us": _gpu_us(fn, repeats) for k, fn in parts.items()})
    w_hh = row["w_hh_h0_us"] if row["split"] else 0.0
    row["rest_us"] = row["whole_us"] - row["kernel_us"] - row["x_split_us"] - row["gemm_scaled_us"] - w_hh
    row["whole_us_per_step"] = row["whole_us"] / STEPS
    row["kernel_us_per_step"] = row["kernel_us"] / STEPS
    return row


def markdown(rows) -> str:
    head = ["dtype", "H", "B", "kind"] + [f"{p} µs" for p in PARTS] + ["rest µs", "whole µs/step", "kernel µs/step"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["dtype"], r["hidden"], r["batch"], r["kind"]] + [fmt(r[f"{p}_us"], ".1f") for p in PARTS]
        cells += [fmt(r["rest_us"], ".1f"), fmt(r["whole_us_per_step"]), fmt(r["kernel_us_per_step"])]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    args, out = bench_args(argv, repeats=30)
    measure_rows(out, "profile_fp32_projection_v33", bench_meta(), ROWS,
                 lambda d, h, b: profile(d, h, b, args.repeats), markdown)


if __name__ == "__main__":
    main()
