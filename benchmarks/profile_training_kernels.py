"""Where a training call's GPU time goes: every kernel, memcpy and memset of one fwd+bwd call of the
persistent engine (eager, so each operation is its own launch), from CUPTI through torch.profiler
(it records CuPy's and cuBLAS's kernels as well as torch's), summed by name per call. Also the
training graphs' GPU time (forward and backward graph launched alone, back to back) and, in the
same process, cuDNN's (torch.nn.LSTM) kernels for the same call.

    python benchmarks/profile_training_kernels.py OUT_DIR [--iterations N]
Writes OUT_DIR/profile_training_kernels.{json,md}.
"""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, bench_args, bench_meta, fmt, measure_rows, training_call  # noqa: E402

ROWS = [("float16", 1024, 8), ("float16", 1024, 16), ("float32", 1024, 8), ("bfloat16", 1024, 4)]


def kernel_times(fn, iterations):
    """{name: (launches per call, GPU µs per call)} of everything ``fn`` runs on the GPU."""
    import cupy as cp
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    cp.cuda.Device().synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iterations):
            fn()
        cp.cuda.Device().synchronize()
        torch.cuda.synchronize()
    totals = defaultdict(lambda: [0, 0.0])
    for event in prof.key_averages():
        us = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0.0)
        if us > 0 and event.key:
            totals[event.key][0] += event.count
            totals[event.key][1] += us
    return {name: (count / iterations, us / iterations) for name, (count, us) in totals.items()}


def _graph_gpu_us(training_set, repeats=20):
    import cupy as cp
    from ecornn.engines import persistent_graph
    stream = persistent_graph._graph_stream()
    out = {}
    for name, graph, ring in (("forward", training_set.forward_graph, training_set.forward_ring),
                              ("backward", training_set.backward_graph, training_set.backward_ring)):
        persistent_graph.launch_bare(graph, ring, stream)
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        for _ in range(repeats):
            persistent_graph.launch_bare(graph, ring, stream)
        end.record(stream)
        end.synchronize()
        out[f"{name}_graph_gpu_us"] = cp.cuda.get_elapsed_time(start, end) * 1e3 / repeats
    return out


def profile_row(dtype, hidden, batch, iterations):
    from ecornn.engines import persistent_train_graph
    train, prepared = training_call(dtype, hidden, batch)
    for _ in range(3):
        train()                                     # compiles, captures the training set
    row = {"dtype": dtype, "hidden": hidden, "batch": batch, "steps": STEPS}
    row.update(_graph_gpu_us(next(iter(prepared.training_sets.values()))[0]))
    persistent_train_graph.ENABLED = False
    try:
        row["persistent"] = kernel_times(train, iterations)
    finally:
        persistent_train_graph.ENABLED = True
    row["cudnn"] = _cudnn_kernels(dtype, hidden, batch, iterations)
    return row


def _cudnn_kernels(dtype, hidden, batch, iterations):
    import torch
    torch_dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    lstm = torch.nn.LSTM(hidden, hidden).cuda().to(torch_dtype)
    x = torch.randn(STEPS, batch, hidden, device="cuda", dtype=torch_dtype, requires_grad=True)

    def train():
        y, _ = lstm(x)
        y.backward(torch.ones_like(y))
    return kernel_times(train, iterations)


def markdown(rows, top=12):
    lines = []
    for r in rows:
        lines.append(f"### {r['dtype']} H={r['hidden']} B={r['batch']} T={r['steps']}: forward graph "
                     f"{fmt(r['forward_graph_gpu_us'], '.0f')} µs, backward graph {fmt(r['backward_graph_gpu_us'], '.0f')} µs\n")
        for engine in ("persistent", "cudnn"):
            kernels = sorted(r[engine].items(), key=lambda kv: -kv[1][1])
            total = sum(us for _, us in r[engine].values())
            lines.append(f"{engine}: {total:.0f} µs GPU per fwd+bwd call\n\n| kernel | per call | µs |\n|---|---|---|")
            for name, (count, us) in kernels[:top]:
                lines.append(f"| {name[:110]} | {count:.0f} | {us:.1f} |")
            rest = sum(us for _, (_, us) in kernels[top:])
            lines.append(f"| (the other {max(0, len(kernels) - top)}) | | {rest:.1f} |\n")
    return "\n".join(lines)


def main(argv=None):
    args, out = bench_args(argv, configure=lambda parser: parser.add_argument("--iterations", type=int, default=5))
    measure_rows(out, "profile_training_kernels", bench_meta(), ROWS,
                 lambda dtype, hidden, batch: profile_row(dtype, hidden, batch, args.iterations), markdown)


if __name__ == "__main__":
    main()
