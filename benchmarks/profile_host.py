"""Host-side (Python) profile of persistent calls: cProfile over repeated inference (graph replay)
and training (forward + backward) calls of one configuration, sorted by own time. Shows which
Python/CuPy calls keep the GPU waiting (benchmarks/profile_whole_call.py measures the gaps).

    python benchmarks/profile_host.py OUT_DIR [--dtype float16] [--hidden 1024] [--batch 8] [--api]
Writes OUT_DIR/profile_host_[api_]<dtype>_<H>_<B>.txt (--api: inference through ecornn.lstm_forward
with a sync per call, as the runner and the sweep time it).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import _problem  # noqa: E402


def _api_call(weights, x, h0, c0):
    """One inference call as `ecornn.run` makes it: lstm_forward on prepare_weights, then a sync."""
    import cupy as cp
    from ecornn import lstm_forward, prepare_weights
    prepared = prepare_weights(weights, strategy="persistent")

    def call():
        lstm_forward(x, prepared, h0, c0, strategy="persistent")
        cp.cuda.get_current_stream().synchronize()
    return call


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--api", action="store_true", help="inference through ecornn.lstm_forward on "
                        "prepare_weights, one device sync per call (as `ecornn.run` times it)")
    args = parser.parse_args(argv)
    import cupy as cp
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(args.dtype, args.hidden, args.batch, seed=1)
    prepared = persistent.prepare(config, weights)
    dy = cp.asarray(np.random.default_rng(1).standard_normal(config.output_shape, dtype=np.float32)).astype(x.dtype)
    zeros = cp.zeros(config.state_shape, x.dtype)
    infer = _api_call(weights, x, h0, c0) if args.api else (
        lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared))

    def train():
        res = persistent.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
        persistent.backward(res[3], dy, zeros, zeros)
    report = io.StringIO()
    for name, fn in (("inference", infer), ("training", train)):
        for _ in range(3):
            fn()
        cp.cuda.Device().synchronize()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(args.calls):
            fn()
        profiler.disable()
        cp.cuda.Device().synchronize()
        report.write(f"==== {name}: {args.calls} calls, {args.dtype} H={args.hidden} B={args.batch}\n")
        stats = pstats.Stats(profiler, stream=report).strip_dirs().sort_stats("tottime")
        stats.print_stats(28)
        stats.sort_stats("cumulative").print_stats(28)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"profile_host_{'api_' if args.api else ''}{args.dtype}_{args.hidden}_{args.batch}.txt"
    path.write_text(report.getvalue())
    print(report.getvalue())


if __name__ == "__main__":
    main()
