"""Where an optimizer step through ecornn.torch.LSTM spends its time (v10): the step timed with CUDA
events, the host time of issuing it (perf_counter, no synchronisation inside), the GPU time of its
kernels (torch.profiler, CUPTI), and cProfile's top functions of the host side.

    python benchmarks/profile_torch_loop.py OUT_DIR [--dtype float16 --hidden 1024 --batch 8]
Writes OUT_DIR/profile_torch_loop_<dtype>_<H>_<B>.txt.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, bench_meta  # noqa: E402
from bench_torch_loop import _loop_step, _timed_ms  # noqa: E402
from profile_training_kernels import kernel_times  # noqa: E402


def _host_us(step, repeats):
    """Median host time of issuing one step (the GPU may still run it afterwards)."""
    import torch
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    torch.cuda.synchronize()
    return sorted(times)[len(times) // 2] * 1e6


def _gpu_kernels(step, repeats):
    """(GPU µs per step, top kernels as (name, count, µs) per step) from CUPTI."""
    rows = sorted(((name, count, us) for name, (count, us) in kernel_times(step, repeats).items()),
                  key=lambda r: -r[2])
    return sum(r[2] for r in rows), rows[:25]


def main(argv=None):
    import torch
    import ecornn.torch as etorch
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = bench_meta()
    tdtype = getattr(torch, args.dtype)
    x = torch.randn(STEPS, args.batch, args.hidden, device="cuda", dtype=tdtype)
    upstream = torch.randn(STEPS, args.batch, args.hidden, device="cuda", dtype=tdtype)
    report = io.StringIO()
    print(meta, file=report)
    for name, module in (("ecornn", etorch.LSTM(args.hidden, args.hidden, strategy="persistent")),
                         ("cudnn", torch.nn.LSTM(args.hidden, args.hidden))):
        step = _loop_step(module.cuda().to(tdtype), x, upstream)
        ms = _timed_ms(step, args.repeats)
        host = _host_us(step, args.repeats)
        gpu, kernels = _gpu_kernels(step, 5)
        print(f"\n## {name} {args.dtype} H={args.hidden} B={args.batch}: step {ms * 1e3:.0f} µs (events), "
              f"host {host:.0f} µs, GPU {gpu:.0f} µs", file=report)
        for key, count, us in kernels:
            print(f"{us:9.1f} µs  x{count:4.1f}  {key[:110]}", file=report)
        if name == "ecornn":
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(args.repeats):
                step()
            profiler.disable()
            torch.cuda.synchronize()
            stats = pstats.Stats(profiler, stream=report)
            print(f"\ncProfile over {args.repeats} steps (cumulative):", file=report)
            stats.sort_stats("cumulative").print_stats(45)
            print("(tottime):", file=report)
            stats.sort_stats("tottime").print_stats(30)
    text = report.getvalue()
    (out / f"profile_torch_loop_{args.dtype}_{args.hidden}_{args.batch}.txt").write_text(text)
    print(text[:6000])


if __name__ == "__main__":
    main()
