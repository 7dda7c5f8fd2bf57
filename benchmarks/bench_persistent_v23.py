"""v23 benchmark: the forward kernels take over two elementwise kernels (persistent.KERNEL_WRITES_16BIT:
16-bit inference outputs stored by the tensor-core kernel, no cast kernel after it; GRID_KERNEL_BIAS:
the fp32 grid forward adds its biases, no add kernel after the projection GEMM) against both off
("v22", the ablation), cuDNN in the same process (torch.nn.LSTM, PyTorch defaults). Per row (T=256,
1 layer, input=hidden, random non-zero inputs, CUDA events, median): the whole forward (graph
replay) and the kernel alone of both modes, fwd+bwd ms, and the ratios to cuDNN.

    python benchmarks/bench_persistent_v23.py OUT_DIR [--repeats N] [--rows N] [--start K] [--name NAME] [--v22-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v23_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float32", 512, 4), ("bfloat16", 1024, 4), ("bfloat16", 2048, 4), ("float16", 1024, 8),
        ("float16", 1024, 16),
        ("float32", 1024, 4)]   # the control: the fp32 split (tensor cores) changes in neither mode
MODES = {"v23": {}, "v22": {"KERNEL_WRITES_16BIT": False, "GRID_KERNEL_BIAS": False}}   # "v23" first unless --v22-first
row, markdown, main = ab_modes.pair_bench(ROWS, MODES, ("v23", "v22"), "persistent_v23_bench", "--v22-first",
                                          "time the v22 mode first (order bias check)")

if __name__ == "__main__":
    main()
