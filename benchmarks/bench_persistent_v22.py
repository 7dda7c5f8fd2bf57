"""v22 benchmark: the fp32 backward's dX, dW_ih and dW_hh GEMMs on 3xTF32 (persistent.FP32_BACKWARD_GEMMS,
those of >= MIN_3XTF32_BACKWARD_FLOPS) against strict SGEMM ("strict", the ablation), cuDNN in the same
process (torch.nn.LSTM, PyTorch defaults). Per row (T=256, 1 layer, input=hidden, random non-zero
inputs, CUDA events, median): fwd+bwd ms of both modes (training graphs on prepared weights), the
whole forward and the kernel (the forward does not change: a control), and the ratios to cuDNN.

    python benchmarks/bench_persistent_v22.py OUT_DIR [--repeats N] [--rows N] [--start K] [--name NAME] [--strict-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v22_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float32", 1024, 8), ("float32", 1024, 4), ("float32", 512, 8), ("float32", 1536, 4),
        ("float32", 512, 4), ("float32", 1024, 1),
        ("float32", 512, 1)]   # the controls: every GEMM under 8 GFLOP, strict in both modes
MODES = {"v22": {"FP32_BACKWARD_GEMMS": "3xtf32"}, "strict": {"FP32_BACKWARD_GEMMS": "strict"}}   # "v22" is timed first unless --strict-first
row, markdown, main = ab_modes.pair_bench(ROWS, MODES, ("v22", "strict"), "persistent_v22_bench", "--strict-first",
                                          "time the strict mode first (order bias check)")

if __name__ == "__main__":
    main()
