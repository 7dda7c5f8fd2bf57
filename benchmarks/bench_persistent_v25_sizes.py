"""v25 size rule: the one-pass 3xTF32 GEMMs from smaller sizes on ("lower": projections from 1 GFLOP,
backward GEMMs from 2 GFLOP) against the rules v6/v22 measured for three GEMMs per product ("v25":
4 and 8 GFLOP), cuDNN in the same process. Rows: fp32, T=256, 1 layer, input=hidden; the projection
is 2 * 256 B * H * 4H flops, each backward GEMM as much (the grid forward at B <= 2 projects x itself).
Measured (results/persistent_v25, call 2): "lower" became the default; "v25" is now the ablation.

    python benchmarks/bench_persistent_v25_sizes.py OUT_DIR [--repeats N] [--rows N] [--start K] [--name NAME] [--v25-first]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402

ROWS = [("float32", 512, 4), ("float32", 512, 8), ("float32", 1024, 2), ("float32", 768, 4),
        ("float32", 512, 2), ("float32", 1024, 4)]
MODES = {"lower": {}, "v25": {"MIN_3XTF32_FLOPS": 4e9, "MIN_3XTF32_BACKWARD_FLOPS": 8e9}}
row, markdown, main = ab_modes.pair_bench(ROWS, MODES, ("lower", "v25"), "persistent_v25_sizes", "--v25-first",
                                          "time the v25 mode first (order bias check)")

if __name__ == "__main__":
    main()
