"""v42: fp32 cells whose split forward now runs on thread-block clusters (rules.cluster_split_pays), each through
bench_persistent.row (T=256, input = hidden): the persistent engine's whole forward and fwd+bwd, the fused engine's
forward, cuDNN's forward and fwd+bwd in the same process. benchmarks/planner_vs_measured.py reads the JSON.

    python benchmarks/bench_cluster_k_v42.py OUT_DIR [--repeats N]
Writes OUT_DIR/bench_cluster_k_v42.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_groups_v39 import run  # noqa: E402

CELLS = [("float32", 1024, 8), ("float32", 1280, 8)]

if __name__ == "__main__":
    run(CELLS, "bench_cluster_k_v42")
