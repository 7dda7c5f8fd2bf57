"""Standalone throughput runner.

``python -m ecornn.run [options]``: one configured LSTM on the best available backend (or the
strategy asked for); prints µs per timestep, TFLOP/s, and which strategy ran and why.
``python -m ecornn.run sweep [options]``: a grid of hidden/batch/dtype/mode, every strategy, cuDNN
and the planner's pick; table, --json, --csv, --plot.
``python -m ecornn.run calibrate``: fit the planner's cost model on this GPU and cache it.
``python -m ecornn.run plan [--device h100] [options]``: what the planner would run, and why, without
running it (``ecornn.run_plan``).
"""
from __future__ import annotations

import argparse
import json
import platform
import sys

import numpy as np

from . import __version__
from .api import lstm_backward, lstm_forward, prepare_weights
from .arrays import cupy_or_none, gpu_available
from .config import LSTMConfig
from .errors import EcornnError
from .progress import Progress
from .timing import median_seconds
from .weights import init_weights, to_dtype

CPU_DEFAULT = dict(hidden=128, batch=4, seq_len=32, iterations=5)
GPU_DEFAULT = dict(hidden=1024, batch=8, seq_len=256, iterations=20)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ecornn.run", description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, help="hidden size H (default: 1024 on a GPU, 128 on CPU)")
    p.add_argument("--input", type=int, help="input size (default: = hidden)")
    p.add_argument("--batch", type=int)
    p.add_argument("--seq-len", type=int)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--bidirectional", action="store_true")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64", "float16", "bfloat16"])
    p.add_argument("--strategy", default="auto", choices=["auto", "reference", "fused", "persistent"])
    p.add_argument("--iterations", type=int)
    p.add_argument("--training", action="store_true", help="time forward + backward")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="write the result record as JSON")
    return p


def config_from_args(args, default: dict) -> LSTMConfig:
    """The problem the options name, sizes not given taken from ``default`` (GPU_DEFAULT, CPU_DEFAULT)."""
    pick = lambda value, key: default[key] if value is None else value  # noqa: E731
    hidden = pick(args.hidden, "hidden")
    return LSTMConfig(input_size=hidden if args.input is None else args.input, hidden_size=hidden,
                      num_layers=args.layers, bidirectional=args.bidirectional, dtype=args.dtype,
                      batch=pick(args.batch, "batch"), seq_len=pick(args.seq_len, "seq_len"))


def resolve_config(args) -> tuple:
    on_gpu = gpu_available() and args.strategy != "reference"
    default = GPU_DEFAULT if on_gpu else CPU_DEFAULT
    config = config_from_args(args, default)
    iterations = default["iterations"] if args.iterations is None else args.iterations
    if iterations <= 0:
        raise EcornnError(f"--iterations: expected a positive int, got {iterations}")
    return config, iterations, on_gpu


def _inputs(config: LSTMConfig, seed: int, xp):
    rng = np.random.default_rng(seed)
    weights = init_weights(config, seed=seed, xp=xp)
    make = lambda shape: to_dtype(rng.standard_normal(shape), config.dtype, xp)  # noqa: E731
    return weights, make(config.input_shape), make(config.state_shape), make(config.state_shape), \
        make(config.output_shape)


def time_config(config, strategy, iterations, training, seed=0, xp=np, progress=True) -> dict:
    """Median time of one forward (and backward) call over ``iterations`` after warm-up."""
    weights, x, h0, c0, dy = _inputs(config, seed, xp)
    first = lstm_forward(x, weights, h0, c0, bidirectional=config.bidirectional, strategy=strategy,
                         training=training)
    if first.strategy != "reference":  # convert weights to the kernel layout once, as a model would
        weights = prepare_weights(weights, strategy=first.strategy, bidirectional=config.bidirectional)

    def once():
        out = lstm_forward(x, weights, h0, c0, bidirectional=config.bidirectional,
                           strategy=first.strategy, training=training)
        if training:
            lstm_backward(out.reserve, dy)

    bar = Progress(iterations, first.strategy) if progress else None
    seconds = median_seconds(once, iterations, xp, on_iteration=bar.update if bar else None)
    if bar:
        bar.close()
    flops = config.flops_per_step() * config.seq_len * (3.0 if training else 1.0)
    return {"strategy": first.strategy, "reason": first.reason,
            "us_per_step": seconds * 1e6 / config.seq_len, "tflops": flops / seconds / 1e12,
            "seconds_per_iteration": seconds, "iterations": iterations}


def device_name(on_gpu: bool) -> str:
    if on_gpu:
        props = cupy_or_none().cuda.runtime.getDeviceProperties(0)
        return props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return f"CPU ({platform.processor() or platform.machine()})"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "sweep":
        return sweep_main(argv[1:])
    if argv and argv[0] == "plan":
        from .run_plan import main as plan_main
        return plan_main(argv[1:])
    if argv and argv[0] == "calibrate":
        from .calibrate import main as calibrate_main
        return calibrate_main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        config, iterations, on_gpu = resolve_config(args)
        if not gpu_available():
            print("no CUDA GPU found: running the NumPy reference on a small default problem",
                  file=sys.stderr)
        xp = cupy_or_none() if on_gpu else np
        result = time_config(config, args.strategy, iterations, args.training, args.seed, xp)
    except EcornnError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    record = {"config": config.__dict__, "training": args.training, "device": device_name(on_gpu),
              "ecornn": __version__, "numpy": np.__version__, **result}
    mode = "forward+backward" if args.training else "forward"
    print(f"{config.dtype} H={config.hidden_size} I={config.input_size} B={config.batch} "
          f"T={config.seq_len} layers={config.num_layers} dirs={config.num_directions} {mode} "
          f"on {record['device']}")
    print(f"strategy: {result['strategy']} ({result['reason']})")
    print(f"{result['us_per_step']:.2f} us/step, {result['tflops']:.4f} TFLOP/s "
          f"(median of {iterations})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(record, fh, indent=2)
        print(f"wrote {args.json}")
    return 0


def _int_list(text: str) -> list:
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive ints, got {text!r}")
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive ints, got {text!r}")
    return values


def _choice_list(choices):
    def parse(text: str) -> list:
        values = [v for v in text.split(",") if v]
        bad = [v for v in values if v not in choices]
        if not values or bad:
            raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {list(choices)}, got {text!r}")
        return values
    return parse


def build_sweep_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ecornn.run sweep",
                                description="Time a grid of problems with every strategy.")
    p.add_argument("--hidden", type=_int_list, help="comma-separated hidden sizes")
    p.add_argument("--batch", type=_int_list, help="comma-separated batch sizes")
    p.add_argument("--dtype", type=_choice_list(("float32", "float64", "float16", "bfloat16")))
    p.add_argument("--mode", type=_choice_list(("inference", "training")), default=["inference"])
    p.add_argument("--strategies", type=_choice_list(("reference", "fused", "persistent")))
    p.add_argument("--seq-len", type=int)
    p.add_argument("--iterations", type=int)
    p.add_argument("--no-torch", action="store_true", help="skip the torch.nn.LSTM (cuDNN) column")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--csv", metavar="PATH")
    p.add_argument("--plot", metavar="PNG")
    return p


def _versions() -> dict:
    from .calibrate import versions
    out = versions()
    try:
        import torch
        out["torch"] = torch.__version__
        out["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        pass
    return out


def sweep_main(argv) -> int:
    from . import sweep
    args = build_sweep_parser().parse_args(argv)
    gpu = gpu_available()
    xp = cupy_or_none() if gpu else np
    defaults = (dict(hidden=[256, 1024], batch=[1, 8, 64], dtype=["float32"], strategies=["persistent", "fused"],
                     seq_len=256, iterations=10) if gpu else
                dict(hidden=[32, 64], batch=[1, 4], dtype=["float32"], strategies=["reference"],
                     seq_len=16, iterations=2))
    if not gpu:
        print("no CUDA GPU found: sweeping the NumPy reference on a small grid", file=sys.stderr)
    pick = lambda name: getattr(args, name) or defaults[name]  # noqa: E731
    strategies = pick("strategies")
    meta = {"device": device_name(gpu), "ecornn": __version__, "numpy": np.__version__,
            "seq_len": pick("seq_len"), "iterations": pick("iterations"), **_versions()}
    save_partial = (lambda done: sweep.write_json(done, args.json, meta)) if args.json else None
    cells = sweep.run_sweep(pick("hidden"), pick("batch"), pick("dtype"), args.mode, strategies,
                            pick("seq_len"), pick("iterations"), xp, time_config,
                            with_torch=False if args.no_torch else None, on_cell=save_partial)
    print(sweep.format_table(cells, strategies))
    quality = sweep.pick_quality(cells)
    if quality.get("cells"):
        print(f"planner: pick within 10% of the fastest in {quality['within_10pct']:.0%} of "
              f"{quality['cells']} cells; worst pick/best {quality['worst']:.2f}")
    if args.json:
        sweep.write_json(cells, args.json, meta)
    if args.csv:
        sweep.write_csv(cells, args.csv)
    if args.plot:
        sweep.plot(cells, args.plot, strategies, sync_floor_us=1.18 if gpu else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
