"""v14 benchmark: the paired fp32 split (B = 1, 2, 4: hi and lo rows of h in one mma N tile, 2 mma
per tile) against the v13 split (PAIRED_SPLIT=False, 3 mma per tile) and the fp32 FFMA kernels
(FP32_TENSOR_CORES=False), cuDNN in the same process (torch.nn.LSTM fp32, PyTorch defaults). Per row
(T=256, 1 layer, input=hidden, random non-zero inputs, CUDA events, median): whole forward (graph
replay) and forward kernel alone µs/step per mode, the paired split with its other exchange, fwd+bwd ms
for the paired split and FFMA (the backward is the fp32 kernels' either way), cuDNN's forward µs/step
and fwd+bwd ms. The ratios to cuDNN are those of what "auto" takes (rules.fp32_split_pays).

    python benchmarks/bench_persistent_v14.py OUT_DIR [--repeats N] [--rows N] [--start K] [--name NAME] [--ffma-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v14_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import ab_bench_main, ab_table, cudnn_ratios, fmt, measured_row  # noqa: E402
from bench_persistent_v13 import measure  # noqa: E402

ROWS = [("float32", 1024, 4), ("float32", 512, 4), ("float32", 1024, 2), ("float32", 1024, 1),
        ("float32", 512, 2), ("float32", 512, 1), ("float32", 1536, 4), ("float32", 1536, 2),
        ("float32", 1024, 8), ("float32", 512, 8)]
MODES = {"split": {"FP32_TENSOR_CORES": True},                          # paired where B is 1, 2, 4
         "unpaired": {"FP32_TENSOR_CORES": True, "PAIRED_SPLIT": False},
         "ffma": {"FP32_TENSOR_CORES": False}}


def row(dtype, hidden, batch, repeats, ffma_first=False):
    return measured_row(lambda *a: measure(*a, modes=MODES, train_modes=("split", "ffma")),
                        dtype, hidden, batch, repeats, ffma_first)


def markdown(rows):
    head = ("| H | B | auto takes | fwd µs/step paired | other exchange | 3-mma split | FFMA | target | kernel paired | "
            "3-mma | FFMA | cuDNN fwd | fwd+bwd ms paired | FFMA | cuDNN fwd+bwd | auto fwd vs cuDNN | "
            "auto fwd+bwd vs cuDNN |")

    def cells(r):
        mode = "split" if r.get("auto_split") else "ffma"
        exchange = lambda tagged: " (tagged)" if tagged else " (grid.sync)"  # noqa: E731
        return ["split" if mode == "split" else "FFMA",
                fmt(r.get("split_graph_fwd_us")) + exchange(r.get("split_tagged")),
                fmt(r.get("split_other_graph_fwd_us")) + exchange(r.get("split_other_tagged")),
                fmt(r.get("unpaired_graph_fwd_us")), fmt(r.get("ffma_graph_fwd_us")), fmt(r.get("target_us"), ".1f"),
                fmt(r.get("split_kernel_us")), fmt(r.get("unpaired_kernel_us")), fmt(r.get("ffma_kernel_us")),
                fmt(r.get("cudnn_us")), fmt(r.get("split_train_ms")), fmt(r.get("ffma_train_ms")),
                fmt(r.get("cudnn_train_ms"))] + cudnn_ratios(r, r.get(f"{mode}_graph_fwd_us"), r.get(f"{mode}_train_ms"))
    return ab_table(rows, head, cells)


def main(argv=None):
    ab_bench_main(argv, ROWS, row, markdown, "persistent_v14_bench", "--ffma-first", "time the FFMA mode first (order bias check)")


if __name__ == "__main__":
    main()
