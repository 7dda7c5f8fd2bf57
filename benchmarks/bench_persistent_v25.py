"""v25 benchmark: 3xTF32 as one TF32 GEMM over a 3x longer reduction (persistent.FP32_GEMMS and
FP32_BACKWARD_GEMMS "onepass") against v22's three GEMMs per product and their size rules ("v24" mode), cuDNN
in the same process (torch.nn.LSTM, PyTorch defaults). Per row (T=256, 1 layer, input=hidden, random
non-zero inputs, CUDA events, median): the whole forward (graph replay) and the kernel alone of both
modes, fwd+bwd ms, and the ratios to cuDNN.

    python benchmarks/bench_persistent_v25.py OUT_DIR [--repeats N] [--rows N] [--start K] [--name NAME] [--v24-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v25_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float32", 512, 4), ("float32", 1024, 4), ("float32", 1024, 8), ("float32", 1536, 4),
        ("float32", 512, 8), ("float32", 768, 4)]
V24 = {"FP32_GEMMS": "3xtf32", "FP32_BACKWARD_GEMMS": "3xtf32", "MIN_3XTF32_FLOPS": 4e9,
       "MIN_3XTF32_BACKWARD_FLOPS": 8e9}   # three GEMMs per product, v6's and v22's size rules
MODES = {"v25": {}, "v24": V24}   # "v25" first unless --v24-first
row, markdown, main = ab_modes.pair_bench(ROWS, MODES, ("v25", "v24"), "persistent_v25_bench", "--v24-first",
                                          "time the v24 mode first (order bias check)")

if __name__ == "__main__":
    main()
