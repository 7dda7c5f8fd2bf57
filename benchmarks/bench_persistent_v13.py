"""v13 benchmark: fp32 forwards split into fp16 hi/lo halves on the tensor-core kernel against the fp32
FFMA kernels (FP32_TENSOR_CORES=False: grid kernel, cluster kernel where "auto" takes it), and cuDNN
in the same process (torch.nn.LSTM fp32, PyTorch defaults). Per row (T=256, 1 layer, input=hidden,
random non-zero inputs, CUDA events, median): the whole forward (graph replay) and fwd+bwd ms in
either mode, the split forward with its other exchange (TAGGED_EXCHANGE forced), the forward kernel
alone, cuDNN's forward µs/step and fwd+bwd ms. The ratios to cuDNN are those of what "auto" takes
(capacity.fp32_split_pays).

    python benchmarks/bench_persistent_v13.py OUT_DIR [--repeats N] [--rows N] [--start K] [--name NAME] [--ffma-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v13_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import (STEPS, _median_ms, _problem, ab_bench_main, cudnn_ratios, fmt,  # noqa: E402
                             kernel_launcher, measured_row, split_table)
from bench_persistent_v5 import _train_ms  # noqa: E402

from ecornn.engines import persistent  # noqa: E402

ROWS = [("float32", 1024, 4), ("float32", 1024, 8), ("float32", 512, 4), ("float32", 256, 1),
        ("float32", 1024, 1), ("float32", 512, 1), ("float32", 512, 8), ("float32", 1536, 4), ("float32", 1024, 16),
        ("float32", 512, 16)]
MODES = {"split": {"FP32_TENSOR_CORES": True}, "ffma": {"FP32_TENSOR_CORES": False}}   # engine flags per mode
DEFAULT_FLAGS = {"FP32_TENSOR_CORES": "auto", "TAGGED_EXCHANGE": "auto", "PAIRED_SPLIT": True}


def _time_mode(config, weights, x, h0, c0, repeats, train=True):
    plan = persistent._final(persistent.plans_for(config, True)["forward"])
    prepared = persistent.prepare(config, weights)   # its graphs are this mode's
    out = {"plan": plan.describe(), "tagged": bool(getattr(plan, "tagged", False)),
           "kernel_us": _median_ms(kernel_launcher(config, prepared, x, h0, c0, plan), repeats) * 1e3 / STEPS}
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    out["graph_fwd_us"] = _median_ms(fwd, repeats) * 1e3 / STEPS
    out["forward_kind"] = persistent.last_kinds.get("forward")
    if train:
        out["train_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats)
    return out


def _set_flags(flags: dict) -> None:
    for name, value in {**DEFAULT_FLAGS, **flags}.items():
        setattr(persistent, name, value)


def measure(dtype, hidden, batch, repeats, ffma_first=False, modes=None, train_modes=None):
    """Every mode of ``modes`` (MODES: engine flags), its whole forward, kernel and, for ``train_modes``
    (all by default), fwd+bwd; "split" also with its other exchange (inference only)."""
    modes = MODES if modes is None else modes
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    out = {"auto_split": persistent.plans_for(config)["forward"].kind == "mma"}
    for mode in sorted(modes, reverse=not ffma_first):   # "split" before "ffma" unless ffma_first
        _set_flags(modes[mode])
        try:
            train = train_modes is None or mode in train_modes
            out.update({f"{mode}_{k}": v for k, v in _time_mode(config, weights, x, h0, c0, repeats, train).items()})
            if mode == "split":   # the other exchange of the split plan, inference only
                persistent.TAGGED_EXCHANGE = not out["split_tagged"]
                out.update({f"split_other_{k}": v
                            for k, v in _time_mode(config, weights, x, h0, c0, repeats, train=False).items()})
        finally:
            _set_flags({})
    return out


def row(dtype, hidden, batch, repeats, ffma_first=False):
    return measured_row(measure, dtype, hidden, batch, repeats, ffma_first)


def markdown(rows):
    head = ("| H | B | auto takes | fwd µs/step split | other exchange | FFMA | target | kernel split | FFMA | "
            "cuDNN fwd | fwd+bwd ms split | FFMA | cuDNN fwd+bwd | auto fwd vs cuDNN | auto fwd+bwd vs cuDNN |")

    def cells(r):
        mode = "split" if r.get("auto_split") else "ffma"   # what "auto" runs
        other = "tagged" if not r.get("split_tagged") else "grid.sync"
        return [mode, fmt(r.get("split_graph_fwd_us")) + (" (tagged)" if r.get("split_tagged") else " (grid.sync)"),
                f"{fmt(r.get('split_other_graph_fwd_us'))} ({other})", fmt(r.get("ffma_graph_fwd_us")),
                fmt(r.get("target_us"), ".1f"), fmt(r.get("split_kernel_us")), fmt(r.get("ffma_kernel_us")),
                fmt(r.get("cudnn_us")), fmt(r.get("split_train_ms")), fmt(r.get("ffma_train_ms")),
                fmt(r.get("cudnn_train_ms"))] + cudnn_ratios(r, r.get(f"{mode}_graph_fwd_us"), r.get(f"{mode}_train_ms"))
    return split_table(rows, head, cells)


def main(argv=None):
    ab_bench_main(argv, ROWS, row, markdown, "persistent_v13_bench", "--ffma-first", "time the FFMA mode first (order bias check)")


if __name__ == "__main__":
    main()
