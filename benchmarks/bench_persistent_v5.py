"""Benchmark of `persistent` v5/v6 against torch.nn.LSTM (cuDNN) in the same process.

v5 = the tagged exchange of the tensor-core kernels (no grid barrier) + CUDA-graph replay of
inference forwards (v9: of training calls too, `fwd+bwd eager` is the ablation, `with refresh` refreshes
the prepared weights in place before each call, as a training step would); v6 = the fp32 grid kernel's staged exchange, tagged or grid.sync(). Per row (T=256, 1 layer, input=hidden, random non-zero inputs, CUDA events,
median): forward µs/step of the whole call (graph replay, and eager), the kernel alone with the
default exchange (rules.tagged_exchange_pays) and forced either way (tagged, grid.sync());
fwd+bwd ms likewise; cuDNN (PyTorch defaults) forward µs/step and fwd+bwd ms; the issue's target.
Ablations: fp32 rows with strict SGEMMs instead of 3xTF32 (v6.1) and either backward (v7); 16-bit
rows with TF32 GEMMs on fp32 copies instead of 16-bit operands (v8); one call's input projection
alone (µs per call, the ablation's in brackets).

    python benchmarks/bench_persistent_v5.py OUT_DIR [--repeats N] [--rows N] [--dtype D] [--name NAME]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v5_bench).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import (STEPS, _median_ms, _problem, _recurrence_ms, bench_meta, measured_row,  # noqa: E402
                             fmt, save_rows)

ROWS = [("bfloat16", 1024, 4), ("float16", 1024, 8), ("float16", 1024, 16), ("bfloat16", 2048, 4),
        ("float16", 1024, 1), ("bfloat16", 512, 4), ("float16", 1024, 2), ("bfloat16", 256, 8),
        ("float32", 256, 1), ("float32", 512, 4), ("float32", 1024, 4), ("float32", 1024, 8),
        ("float32", 512, 1), ("float32", 512, 8), ("float32", 1024, 1), ("float32", 1536, 4),
        ("float32", 1024, 16)]


def _train_ms(config, weights, x, h0, c0, prepared, repeats, refresh=False):
    """fwd+bwd ms; ``refresh``: each call first refreshes the prepared weights in place (what a
    training step with an optimizer does, v9)."""
    import cupy as cp
    from ecornn.engines import persistent
    dy = cp.asarray(np.random.default_rng(1).standard_normal(config.output_shape, dtype=np.float32)).astype(x.dtype)
    zeros = cp.zeros(config.state_shape, x.dtype)

    def train():
        if refresh:
            persistent.refresh(prepared, config, weights)
        res = persistent.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
        persistent.backward(res[3], dy, zeros, zeros)
    return _median_ms(train, max(5, repeats // 2))


def _projection_us(config, prepared, x, repeats):
    """One call's input projection (16-bit conversion included), µs, as the forward runs it."""
    from ecornn.engines import persistent
    layer_in, gemm_dtype = persistent._f32(x), persistent._gemm_dtype(config)
    with_bias = config.dtype == "float32"   # the mma kernel adds the biases itself

    def project():
        x16 = persistent._storage16(layer_in, gemm_dtype) if gemm_dtype else None
        persistent._input_projections(layer_in, prepared.slots[0:1], persistent._tf32_for(config), with_bias,
                                      x16, gemm_dtype)
    return _median_ms(project, repeats) * 1e3


def measure(dtype, hidden, batch, repeats):
    from ecornn.engines import persistent, persistent_graph, persistent_train_graph
    default_gemms = persistent.FP32_GEMMS   # put back after the strict ablation
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    out = {"graph_fwd_us": _median_ms(fwd, repeats) * 1e3 / STEPS, "kind": persistent.last_kinds.get("forward"),
           "graph_captured": len(prepared.graphs) > 0, "capture_errors": {str(k): v for k, v in persistent_graph.capture_errors.items()}}
    persistent_graph.ENABLED = False
    out["eager_fwd_us"] = _median_ms(fwd, repeats) * 1e3 / STEPS
    persistent_graph.ENABLED = True
    plan = persistent.plans_for(config, False)["forward"]
    out["kernel_us"] = _recurrence_ms(config, prepared, x, h0, c0, plan) * 1e3 / STEPS
    out["tagged_default"] = {name: p.tagged for name, p in persistent.plans_for(config, True).items()}
    for tagged, key in ((True, "tagged"), (False, "grid_sync")):
        out[f"kernel_{key}_us"] = _recurrence_ms(config, prepared, x, h0, c0,
                                                  plan.with_exchange(tagged)) * 1e3 / STEPS
    out["projection_us"] = _projection_us(config, prepared, x, repeats)
    try:
        if dtype != "float32":   # v8 ablation: TF32 GEMMs on fp32 copies (v5) instead of 16-bit operands
            persistent.SIXTEEN_BIT_GEMMS = False
            out["projection_tf32_us"] = _projection_us(config, prepared, x, repeats)
            out["graph_fwd_tf32_gemm_us"] = _median_ms(fwd, repeats) * 1e3 / STEPS
            out["train_tf32_gemm_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats)
            persistent.SIXTEEN_BIT_GEMMS = True
        if dtype == "float32":   # v6 ablation: the strict SGEMMs instead of the 3xTF32 GEMMs (v25: one-pass)
            persistent.FP32_GEMMS = "strict"
            out["graph_fwd_strict_gemm_us"] = _median_ms(fwd, repeats) * 1e3 / STEPS
            out["train_strict_gemm_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats)
            persistent.FP32_GEMMS = default_gemms
            for by_rows, key in ((False, "grid"), (True, "rows")):   # v7 ablation: either backward
                persistent.BACKWARD_BY_ROWS = by_rows
                out[f"train_{key}_backward_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats)
            persistent.BACKWARD_BY_ROWS = "auto"
            out["backward_kind"] = persistent.plans_for(config, True)["backward"].kind
        out["train_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats)
        out["train_sets"] = sum(len(v) for v in prepared.training_sets.values())
        out["train_refresh_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats, refresh=True)
        persistent_train_graph.ENABLED = False     # v9 ablation: training calls eager
        out["train_eager_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats)
        persistent_train_graph.ENABLED = True
        for tagged, key in ((True, "tagged"), (False, "grid_sync")):
            persistent.TAGGED_EXCHANGE = tagged
            out[f"train_{key}_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats)
    except Exception as exc:  # NotSupported or a failure: recorded, never hidden
        out["train_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        persistent_train_graph.ENABLED = True
        persistent.TAGGED_EXCHANGE = "auto"
        persistent.FP32_GEMMS = default_gemms
        persistent.BACKWARD_BY_ROWS = "auto"
        persistent.SIXTEEN_BIT_GEMMS = True
    return out


def row(dtype, hidden, batch, repeats):
    return measured_row(measure, dtype, hidden, batch, repeats)


def markdown(rows):
    head = ("| dtype | H | B | fwd µs/step (graph) | eager | strict / TF32 GEMM | projection µs | kernel | kernel tagged | kernel grid.sync | "
            "target | cuDNN fwd | fwd+bwd ms | with refresh | fwd+bwd eager | backward | tagged | grid.sync | strict / TF32 GEMM | grid bwd | rows bwd | "
            "cuDNN fwd+bwd | fwd vs cuDNN | fwd+bwd vs cuDNN |")
    lines = [head, "|" + "---|" * 24]
    for r in rows:
        g, c, t, ct = r.get("graph_fwd_us"), r.get("cudnn_us"), r.get("train_ms"), r.get("cudnn_train_ms")
        lines.append("| " + " | ".join([
            r["dtype"], str(r["hidden"]), str(r["batch"]), fmt(g), fmt(r.get("eager_fwd_us")),
            fmt(r.get("graph_fwd_strict_gemm_us", r.get("graph_fwd_tf32_gemm_us"))),
            fmt(r.get("projection_us")) + (f" ({fmt(r['projection_tf32_us'])})" if "projection_tf32_us" in r else ""),
            fmt(r.get("kernel_us")), fmt(r.get("kernel_tagged_us")), fmt(r.get("kernel_grid_sync_us")),
            fmt(r.get("target_us"), ".1f"), fmt(c), fmt(t), fmt(r.get("train_refresh_ms")), fmt(r.get("train_eager_ms")), str(r.get("backward_kind", "-")),
            fmt(r.get("train_tagged_ms")), fmt(r.get("train_grid_sync_ms")), fmt(r.get("train_strict_gemm_ms", r.get("train_tf32_gemm_ms"))),
            fmt(r.get("train_grid_backward_ms")), fmt(r.get("train_rows_backward_ms")), fmt(ct),
            fmt(c / g if g and c else None) + "x", fmt(ct / t if t and ct else None) + "x"]) + " |")
        for key in ("error", "train_error", "cudnn_error"):
            if key in r:
                lines.append(f"|  | {key}: {r[key]} |" + " |" * 22)
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rows", type=int, help="only the first N rows (the 16-bit target rows first)")
    parser.add_argument("--dtype", help="only the rows of this dtype")
    parser.add_argument("--name", default="persistent_v5_bench", help="output file stem")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = bench_meta()
    rows = []
    for dtype, hidden, batch in [r for r in ROWS if args.dtype in (None, r[0])][:args.rows]:
        rows.append(row(dtype, hidden, batch, args.repeats))
        print(json.dumps(rows[-1], default=str), flush=True)
        save_rows(out, args.name, meta, rows)   # after every row: a timeout keeps them
    table = markdown(rows)
    save_rows(out, args.name, meta, rows, table)
    print(table)


if __name__ == "__main__":
    main()
