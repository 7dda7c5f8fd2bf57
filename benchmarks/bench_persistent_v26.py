"""v26 benchmark: the tagged exchange past 4 polls per lane where the warps wait otherwise
(persistent.TAGGED_WITH_WAIT: 16-bit forwards at B <= 8 with the in-kernel projection, the paired fp32
split at B=4 with a 1200 ns first-poll delay) against v5's exchange rule alone ("v25" mode), cuDNN
in the same process (torch.nn.LSTM, PyTorch defaults). Per row (T=256, 1 layer, input=hidden, random
non-zero inputs, CUDA events, median): the whole forward (graph replay) and the kernel alone of both
modes, fwd+bwd ms, and the ratios to cuDNN. benchmarks/ab_alternate.py alternates the two modes.

    python benchmarks/bench_persistent_v26.py OUT_DIR [--repeats N] [--rows N] [--start K] [--name NAME] [--v25-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v26_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float16", 1024, 8), ("float32", 1024, 4), ("bfloat16", 1024, 8), ("float16", 512, 8),
        ("float16", 768, 8), ("bfloat16", 1000, 8)]
MODES = {"v26": {}, "v25": {"TAGGED_WITH_WAIT": False}}   # "v26" first unless --v25-first
row, markdown, main = ab_modes.pair_bench(ROWS, MODES, ("v26", "v25"), "persistent_v26_bench", "--v25-first",
                                          "time the v25 mode first (order bias check)")

if __name__ == "__main__":
    main()
