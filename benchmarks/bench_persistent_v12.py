"""v12 benchmark: the tensor-core forward with the input projection inside the kernel against the
projection as a GEMM before it (IN_KERNEL_PROJECTION=False, the ablation), and cuDNN in the same
process (torch.nn.LSTM, PyTorch defaults). Per row (T=256, 1 layer, input=hidden, random non-zero
inputs, CUDA events, median): the whole forward (graph replay) and fwd+bwd ms in either mode, the
forward kernel alone in either mode (with the projection it does the GEMM's work too), cuDNN's
forward µs/step and fwd+bwd ms. "In kernel" is forced (IN_KERNEL_PROJECTION=True) wherever it fits;
the ratios to cuDNN are those of the mode "auto" takes (rules.input_projection_pays).

    python benchmarks/bench_persistent_v12.py OUT_DIR [--repeats N] [--rows N] [--name NAME] [--gemm-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v12_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent import _problem, ab_bench_main, ab_table, cudnn_ratios, fmt, measured_row  # noqa: E402

from ecornn.engines import persistent  # noqa: E402

ROWS = [("float16", 1024, 8), ("float16", 1024, 16), ("bfloat16", 1024, 4), ("bfloat16", 2048, 4),
        ("float16", 1024, 1), ("bfloat16", 512, 8)]
MODES = {"in_kernel": {"IN_KERNEL_PROJECTION": True}, "gemm": {"IN_KERNEL_PROJECTION": False}}


def measure(dtype, hidden, batch, repeats, gemm_first=False):
    problem = _problem(dtype, hidden, batch, seed=hidden + batch)
    config = problem[0]
    out = {"auto_in_kernel": persistent._final(persistent.plans_for(config, True)["forward"]).in_kernel_projection,
           **ab_modes.measure_modes(problem, MODES, repeats, gemm_first)}   # "in_kernel" first unless gemm_first
    out["projection_fits"] = "input projection in the kernel" in out["in_kernel_plan"]
    return out


def row(dtype, hidden, batch, repeats, gemm_first=False):
    return measured_row(measure, dtype, hidden, batch, repeats, gemm_first)


def markdown(rows):
    head = ("| dtype | H | B | auto takes | fwd µs/step in kernel | GEMM | target | kernel in kernel | GEMM | cuDNN fwd | "
            "fwd+bwd ms in kernel | GEMM | cuDNN fwd+bwd | auto fwd vs cuDNN | auto fwd+bwd vs cuDNN |")

    def cells(r):
        mode = "in_kernel" if r.get("auto_in_kernel") else "gemm"   # what "auto" runs
        return ["in kernel" if r.get("auto_in_kernel") else "GEMM",
                fmt(r.get("in_kernel_graph_fwd_us")) if r.get("projection_fits") else "doesn't fit",
                fmt(r.get("gemm_graph_fwd_us")), fmt(r.get("target_us"), ".1f"),
                fmt(r.get("in_kernel_kernel_us")), fmt(r.get("gemm_kernel_us")), fmt(r.get("cudnn_us")),
                fmt(r.get("in_kernel_train_ms")), fmt(r.get("gemm_train_ms")),
                fmt(r.get("cudnn_train_ms"))] + cudnn_ratios(r, r.get(f"{mode}_graph_fwd_us"), r.get(f"{mode}_train_ms"))
    return ab_table(rows, head, cells, lead=("dtype", "hidden", "batch"))


def main(argv=None):
    ab_bench_main(argv, ROWS, row, markdown, "persistent_v12_bench", "--gemm-first", "time the GEMM mode first (order bias check)")


if __name__ == "__main__":
    main()
