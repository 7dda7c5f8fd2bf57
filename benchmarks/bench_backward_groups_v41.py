"""v41: fp32 training cells whose grid backward now runs in batch groups (rules.grid_backward_groups_pay), each
through bench_persistent.row (T=256, input = hidden): the persistent engine's whole forward and fwd+bwd, the fused
engine's forward, cuDNN's forward and fwd+bwd in the same process. benchmarks/planner_vs_measured.py reads the JSON.

    python benchmarks/bench_backward_groups_v41.py OUT_DIR [--repeats N]
Writes OUT_DIR/bench_backward_groups_v41.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_groups_v39 import run  # noqa: E402

CELLS = [("float32", 256, 16), ("float32", 256, 32), ("float32", 384, 32), ("float32", 512, 16),
         ("float32", 512, 32), ("float32", 256, 64), ("float32", 512, 64), ("float32", 768, 32),
         ("float32", 512, 8), ("float32", 128, 64)]

if __name__ == "__main__":
    run(CELLS, "bench_backward_groups_v41")
