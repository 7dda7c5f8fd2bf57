"""v41: fp32 cells whose split forward now runs in groups of 2 columns (rules.split_group_counts), each through
bench_persistent.row (T=256, input = hidden): the persistent engine's whole forward and fwd+bwd, the fused engine's
forward, cuDNN's forward and fwd+bwd in the same process. benchmarks/planner_vs_measured.py reads the JSON.

    python benchmarks/bench_split_pairs_v41.py OUT_DIR [--repeats N]
Writes OUT_DIR/bench_split_pairs_v41.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_groups_v39 import run  # noqa: E402

CELLS = [("float32", 512, 4), ("float32", 384, 4), ("float32", 640, 4), ("float32", 768, 4), ("float32", 256, 8),
         ("float32", 384, 8), ("float32", 512, 8), ("float32", 512, 6)]

if __name__ == "__main__":
    run(CELLS, "bench_split_pairs_v41")
