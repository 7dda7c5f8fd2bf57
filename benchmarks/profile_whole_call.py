"""Where a persistent forward's whole call spends its time beyond the kernel (H100, T=256).

Per row: the graph-replayed call's host time and GPU span (cupyx.profiler.benchmark: CPU time of
the call; GPU time between events recorded before and after it, which includes any wait for the
host), with the replay's inputs handled both ways (persistent_graph.CAPTURE_INPUT_CASTS: memcpy into
caller-dtype buffers, conversion captured (v8) / elementwise conversion into fp32 buffers by the
replay (v5)); then the GPU time of parts issued back to back N times (the GPU never waits for Python
unless the part's host time exceeds its GPU time, as for the replay's input copies and output casts):
the captured graph alone, the kernel alone, the projection alone, the casts. Same process as
torch.nn.LSTM (cuDNN), whose call is profiled the same way.

    python benchmarks/profile_whole_call.py OUT_DIR [--repeats N]
Writes OUT_DIR/profile_whole_call.{json,md}.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _problem, bench_args, bench_meta, fmt, kernel_launcher, measure_rows  # noqa: E402

ROWS = [("float32", 512, 4), ("float32", 1024, 4), ("bfloat16", 1024, 4), ("float16", 1024, 8), ("float16", 1024, 16),
        ("bfloat16", 2048, 4)]


def _host_and_span_us(fn, repeats):
    """(median host µs, median GPU span µs) of one call (the span includes waits for the host)."""
    from cupyx.profiler import benchmark
    result = benchmark(fn, n_repeat=repeats, n_warmup=3)
    return float(np.median(result.cpu_times)) * 1e6, float(np.median(result.gpu_times[0])) * 1e6


def _gpu_us(fn, repeats):
    """GPU µs per call of ``fn`` issued ``repeats`` times back to back (the host runs ahead)."""
    import cupy as cp
    fn()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(repeats):
        fn()
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end) * 1e3 / repeats


def profile(dtype, hidden, batch, repeats):
    from ecornn.engines import persistent, persistent_graph
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    out = {}
    for captured, suffix in ((False, "_v5"), (True, "")):
        persistent_graph.CAPTURE_INPUT_CASTS = captured
        prepared.graphs.clear()
        fwd(), fwd()                                         # the second call captures the graph
        out[f"call_host{suffix}_us"], out[f"call_span{suffix}_us"] = _host_and_span_us(fwd, repeats)
    out.update(kind=persistent.last_kinds.get("forward"), graphs=len(prepared.graphs))
    entry = next(iter(prepared.graphs.values()))
    stream = persistent.persistent_graph._graph_stream()
    with stream:
        out["graph_gpu_us"] = _gpu_us(lambda: entry.launch_bare(stream), repeats)
        plan = persistent.plans_for(config, False)["forward"]
        layer_in = persistent._f32(x)
        out["projection_gpu_us"] = _gpu_us(lambda: persistent._input_projections(
            layer_in, prepared.slots[0:1], persistent._tf32_for(config), plan.kind != "mma"), repeats)
        out["kernel_gpu_us"] = _gpu_us(kernel_launcher(config, prepared, x, h0, c0, plan), repeats)

        def casts():   # what a replay does around the graph launch
            for dst, src in zip(entry.inputs, (x, h0, c0)):
                persistent_graph._copy_in(dst, src, stream)
            return tuple(a.astype(x.dtype, copy=True) for a in entry.outputs)
        out["casts_gpu_us"] = _gpu_us(casts, repeats)
        out["casts_host_us"], _ = _host_and_span_us(casts, repeats)
    out.update(_training_profile(config, weights, x, h0, c0, prepared, repeats))
    return out


def _training_profile(config, weights, x, h0, c0, prepared, repeats):
    """fwd+bwd call: host time and GPU span, and the GPU time of its training forward and its
    backward each issued back to back (GPU-bound where their GPU time exceeds their host time)."""
    import cupy as cp
    from ecornn.engines import persistent
    dy = cp.asarray(np.random.default_rng(1).standard_normal(config.output_shape, dtype=np.float32)).astype(x.dtype)
    zeros = cp.zeros(config.state_shape, x.dtype)
    forward = lambda: persistent.forward(config, x, weights, h0, c0, training=True, prepared=prepared)  # noqa: E731
    out = {}
    out["train_host_us"], out["train_span_us"] = _host_and_span_us(
        lambda: persistent.backward(forward()[3], dy, zeros, zeros), repeats)
    out["train_fwd_gpu_us"] = _gpu_us(forward, repeats)
    reserve = forward()[3]
    out["backward_gpu_us"] = _gpu_us(lambda: persistent.backward(reserve, dy, zeros, zeros), repeats)
    out["backward_host_us"], _ = _host_and_span_us(lambda: persistent.backward(reserve, dy, zeros, zeros), repeats)
    return out


def cudnn_profile(dtype, hidden, batch, repeats):
    import torch
    tdtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    lstm = torch.nn.LSTM(hidden, hidden, 1).cuda().to(tdtype)
    x = torch.randn(STEPS, batch, hidden, device="cuda", dtype=tdtype)
    h0 = torch.randn(1, batch, hidden, device="cuda", dtype=tdtype) * 0.5

    def fwd():
        with torch.no_grad():
            lstm(x, (h0, h0))
    host, span = _host_and_span_us(fwd, repeats)
    out = {"cudnn_host_us": host, "cudnn_span_us": span}
    x.requires_grad_(True)

    def train():
        y, _ = lstm(x, (h0, h0))
        y.sum().backward()
    out["cudnn_train_host_us"], out["cudnn_train_span_us"] = _host_and_span_us(train, repeats)
    return out


def markdown(rows):
    cols = [("call_span_us", "call span"), ("call_span_v5_us", "call span v5"), ("call_host_us", "call host"),
            ("call_host_v5_us", "call host v5"), ("graph_gpu_us", "graph GPU"),
            ("kernel_gpu_us", "kernel GPU"), ("projection_gpu_us", "projection GPU"), ("casts_gpu_us", "casts GPU"),
            ("casts_host_us", "casts host"), ("cudnn_span_us", "cuDNN span"), ("cudnn_host_us", "cuDNN host"),
            ("train_span_us", "fwd+bwd span"), ("train_host_us", "fwd+bwd host"), ("train_fwd_gpu_us", "train fwd GPU"),
            ("backward_gpu_us", "bwd GPU"), ("backward_host_us", "bwd host"), ("cudnn_train_span_us", "cuDNN fwd+bwd span"),
            ("cudnn_train_host_us", "cuDNN fwd+bwd host")]
    lines = ["| dtype | H | B | kind | " + " | ".join(c[1] + " µs" for c in cols) + " | span − kernel, µs/step |",
             "|" + "---|" * (len(cols) + 5)]
    for r in rows:
        extra = (r["call_span_us"] - r["kernel_gpu_us"]) / STEPS if "call_span_us" in r else None
        lines.append(f"| {r['dtype']} | {r['hidden']} | {r['batch']} | {r.get('kind', '-')} | "
                     + " | ".join(fmt(r.get(k), ".1f") for k, _ in cols) + f" | {fmt(extra)} |")
        if "error" in r:
            lines.append(f"|  | error: {r['error']} |")
    return "\n".join(lines) + "\n"


def whole_call_row(dtype, hidden, batch, repeats) -> dict:
    row = {"dtype": dtype, "hidden": hidden, "batch": batch, "steps": STEPS}
    try:
        row.update(profile(dtype, hidden, batch, repeats))
        row.update(cudnn_profile(dtype, hidden, batch, repeats))
    except Exception as exc:  # recorded, never hidden
        row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    print(json.dumps(row), flush=True)
    return row


def main(argv=None):
    args, out = bench_args(argv)
    measure_rows(out, "profile_whole_call", bench_meta(), ROWS,
                 lambda dtype, hidden, batch: whole_call_row(dtype, hidden, batch, args.repeats), markdown)


if __name__ == "__main__":
    main()
