"""v13 benchmark: fp32 forwards split into fp16 hi/lo halves on the tensor-core kernel against the fp32
FFMA kernels (FP32_TENSOR_CORES=False: grid kernel, cluster kernel where "auto" takes it), and cuDNN
in the same process (torch.nn.LSTM fp32, PyTorch defaults). Per row (T=256, 1 layer, input=hidden,
random non-zero inputs, CUDA events, median): the whole forward (graph replay) and fwd+bwd ms in
either mode, the split forward with its other exchange (TAGGED_EXCHANGE forced), the forward kernel
alone, cuDNN's forward µs/step and fwd+bwd ms. The ratios to cuDNN are those of what "auto" takes
(rules.fp32_split_pays).

    python benchmarks/bench_persistent_v13.py OUT_DIR [--repeats N] [--rows N] [--start K] [--name NAME] [--ffma-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v13_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent import _problem, ab_bench_main, ab_table, cudnn_ratios, fmt, measured_row  # noqa: E402

from ecornn.engines import persistent  # noqa: E402

ROWS = [("float32", 1024, 4), ("float32", 1024, 8), ("float32", 512, 4), ("float32", 256, 1),
        ("float32", 1024, 1), ("float32", 512, 1), ("float32", 512, 8), ("float32", 1536, 4), ("float32", 1024, 16),
        ("float32", 512, 16)]
MODES = {"split": {"FP32_TENSOR_CORES": True}, "ffma": {"FP32_TENSOR_CORES": False}}   # engine flags per mode


def measure(dtype, hidden, batch, repeats, ffma_first=False, modes=None, train_modes=None):
    """Every mode of ``modes`` (MODES: engine flags), its whole forward, kernel and, for ``train_modes``
    (all by default), fwd+bwd; "split" also with its other exchange (inference only)."""
    problem = _problem(dtype, hidden, batch, seed=hidden + batch)
    config, weights, x, h0, c0 = problem

    def other_exchange(mode, out):   # the split plan's other exchange, inference only
        if mode == "split":
            persistent.TAGGED_EXCHANGE = not out["split_tagged"]
            out.update({f"split_other_{k}": v
                        for k, v in ab_modes.time_mode(config, weights, x, h0, c0, repeats, train=False).items()})
    return {"auto_split": persistent.plans_for(config)["forward"].kind == "mma",
            **ab_modes.measure_modes(problem, MODES if modes is None else modes, repeats, ffma_first, train_modes,
                                     other_exchange)}


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
    return ab_table(rows, head, cells)


def main(argv=None):
    ab_bench_main(argv, ROWS, row, markdown, "persistent_v13_bench", "--ffma-first", "time the FFMA mode first (order bias check)")


if __name__ == "__main__":
    main()
