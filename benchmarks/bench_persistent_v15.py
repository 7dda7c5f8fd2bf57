"""v15 benchmark: the fp32 grid (FFMA) forward with x W_ih^T inside the kernel against the projection
as a GEMM before it (IN_KERNEL_PROJECTION=False, the ablation), and cuDNN in the same process
(torch.nn.LSTM, PyTorch defaults). The table and timing are v12's (bench_persistent_v12.measure):
per row (T=256, 1 layer, input=hidden, random non-zero inputs, CUDA events, median) the whole
forward (graph replay), the kernel alone and fwd+bwd in either mode, cuDNN's forward and fwd+bwd.

    python benchmarks/bench_persistent_v15.py OUT_DIR [--repeats N] [--rows N] [--name NAME] [--gemm-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v15_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import ab_bench_main  # noqa: E402
from bench_persistent_v12 import markdown, row  # noqa: E402

# fp32 cells the grid forward runs at inference (the split takes B >= 8 from H=512, the cluster
# kernel H <= 256): the target row first.
ROWS = [("float32", 512, 4), ("float32", 512, 1), ("float32", 512, 2), ("float32", 384, 8), ("float32", 640, 1)]


def main(argv=None):
    ab_bench_main(argv, ROWS, row, markdown, "persistent_v15_bench", "--gemm-first", "time the GEMM mode first (order bias check)")


if __name__ == "__main__":
    main()
